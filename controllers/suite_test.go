package controllers

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/events"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/landform-dev/landform/internal/inputs"
	"github.com/landform-dev/landform/internal/mtls"
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/planstore"
	"github.com/landform-dev/landform/internal/source"
	"github.com/landform-dev/landform/internal/testenv"
	"github.com/landform-dev/landform/internal/testenv/enginemirror"
	"github.com/landform-dev/landform/internal/unsavedstate"
	"github.com/landform-dev/landform/runner"
)

// The integration suite: a real kube-apiserver and etcd (envtest), the real
// runner binary as local child processes, and a real OpenTofu.
var (
	k8sClient client.Client
	restCfg   *rest.Config
	artifacts *artifactServer
	// controllerLogs and runnerLogs collect every line either wrote, so that
	// tests can scan them for secret values.
	controllerLogs = &testenv.SyncBuffer{}
	runnerLogs     = &testenv.SyncBuffer{}
	// effects is where test modules create their external objects (files).
	effects string
	// mirror is the provider filesystem mirror the runners use.
	mirror string
	// kubeClientset is a typed client for what the tests read directly.
	kubeClientset *kubernetes.Clientset
	// testKubeconfig reaches the suite's API server (for tofu and the CLI).
	testKubeconfig string
	// tofuPath is the engine the runners use.
	tofuPath string
	// runnerBinPath is the landform-runner binary.
	runnerBinPath string
	// controllerView reads through the controller's own cache: what its
	// next reconcile sees.
	controllerView client.Reader
	// runsUnsaved is the store through which the suite's runs keep a
	// state they could not save: a test keeping one as a run would keeps
	// it there, and the controller, which remembers finding none, looks
	// again.
	runsUnsaved unsavedstate.Store
	// terraformMirror serves Terraform 1.5.7, and 1.4.6 tampered with, as
	// spec.engine's Terraform releases; the OpenTofu source is a mirror
	// whose checksums another key signed (terraform_engine_test.go).
	terraformMirror *enginemirror.Mirror
	// tofuVersion is the runner's own OpenTofu's version.
	tofuVersion string
	// notified is what notification-controller would receive from the
	// controller (its --events-addr).
	notified = &notificationSink{}
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	root, _ := filepath.Abs("..")
	tmp, err := os.MkdirTemp("", "landform-controllers-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(tmp)

	engine, err := testenv.Tool("tofu", "LANDFORM_TOFU")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration tests need OpenTofu:", err)
		return 1
	}
	runnerBin, err := testenv.RunnerBinary(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mirror = filepath.Join(tmp, "providers")
	if err := testenv.BuildProviderMirror(mirror); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	effects = filepath.Join(tmp, "effects")
	_ = os.MkdirAll(effects, 0o755)

	ctrl.SetLogger(zap.New(zap.WriteTo(io.MultiWriter(controllerLogs, testLogSink())), zap.Level(zapcore.DebugLevel)))

	env, err := testenv.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	restCfg, k8sClient = env.Config, env.Client
	scheme := env.Scheme

	artifacts = newArtifactServer(filepath.Join(tmp, "artifacts"))
	defer artifacts.srv.Close()

	// The manager acts as the controller does in a cluster, under the
	// chart's ClusterRole (config/rbac/role.yaml): a write it lacks the
	// rights for fails here as it would there. The tests act as admin.
	ctrlCfg, err := env.ControllerConfig(context.Background())
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	ctrlClient, err := client.New(ctrlCfg, client.Options{Scheme: scheme})
	if err != nil {
		panic(err)
	}
	ctrlKube, err := kubernetes.NewForConfig(ctrlCfg)
	if err != nil {
		panic(err)
	}
	mgr, err := ctrl.NewManager(ctrlCfg, ctrl.Options{Scheme: scheme, Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}}, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		panic(err)
	}
	ca, err := mtls.NewCA("landform-test", time.Hour)
	if err != nil {
		panic(err)
	}
	kubeconfig := filepath.Join(tmp, "kubeconfig")
	if err := placement.WriteKubeconfig(restCfg, kubeconfig); err != nil {
		panic(err)
	}
	podPlacer, err := newPodPlacer(ctrlClient)
	if err != nil {
		panic(err)
	}
	kube, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		panic(err)
	}
	kubeClientset, testKubeconfig, tofuPath, runnerBinPath = kube, kubeconfig, engine, runnerBin
	terraform := testenv.EnvOr("LANDFORM_TERRAFORM", filepath.Join(root, "bin", "terraform"))
	terraformMirror, err = enginemirror.Start(filepath.Join(tmp, "terraform-mirror"),
		enginemirror.WithTerraform(terraform, "1.5.7", "1.4.6"), enginemirror.Tampered("terraform", "1.4.6"))
	if err != nil {
		panic(err)
	}
	defer terraformMirror.Close()
	otherSigner, err := enginemirror.Start(filepath.Join(tmp, "tofu-mirror"), enginemirror.WithOpenTofu(engine, "1.11.0"), enginemirror.SignedByAnotherKey())
	if err != nil {
		panic(err)
	}
	defer otherSigner.Close()
	if tofuVersion, err = engineVersion(engine); err != nil {
		panic(err)
	}
	localPlacer := func(engine, dir string) *placement.Local {
		return &placement.Local{
			CA:         ca,
			Kubeconfig: kubeconfig,
			Grace:      10 * time.Second,
			Options: runner.LocalOptions{
				Binary:          runnerBin,
				Engine:          engine,
				WorkDir:         filepath.Join(tmp, dir),
				ProviderMirrors: []string{mirror},
				EngineDir:       filepath.Join(tmp, "engines"),
				Stdout:          runnerLogs,
				Stderr:          runnerLogs,
			},
		}
	}
	controllerView = mgr.GetClient()
	eventsAddr := httptest.NewServer(notified)
	defer eventsAddr.Close()
	recorder, err := events.NewRecorder(mgr, ctrl.Log.WithName("events"), eventsAddr.URL, ControllerName)
	if err != nil {
		panic(err)
	}
	notifier, err := NewNotifier(mgr.GetScheme(), ctrl.Log.WithName("events"), eventsAddr.URL)
	if err != nil {
		panic(err)
	}
	r := &TerraformReconciler{
		Client:        mgr.GetClient(),
		EventRecorder: recorder,
		Notifier:      notifier,
		Fetcher:       source.NewFetcher(filepath.Join(tmp, "cache")),
		Plans:         planstore.Store{Client: mgr.GetClient()},
		Placer:        &routingPlacer{pod: podPlacer, kubelet: runningPodPlacer(podPlacer), reuse: reusingPodPlacer(podPlacer, podReuseTime), keep: keepingPlacer(podPlacer), local: localPlacer(engine, "runners"), terraform: localPlacer(terraform, "runners-terraform")},
		Engines: inputs.EngineSources{
			Terraform: inputs.EngineSource{ReleasesURL: terraformMirror.URL("terraform"), SigningKey: terraformMirror.SigningKey()},
			OpenTofu:  inputs.EngineSource{ReleasesURL: otherSigner.URL("opentofu"), SigningKey: otherSigner.SigningKey()},
		},
	}
	if err := withRuns(mgr, r, ctrlKube, 8); err != nil {
		panic(err)
	}
	runsUnsaved = r.Custody.UnsavedStates()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := r.SetupWithManager(ctx, mgr, Options{MaxConcurrentReconciles: 2}); err != nil {
		panic(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "manager: %v\n", err)
		}
	}()
	code := m.Run()
	cancel()
	<-done
	return code
}

// testLogSink shows controller logs with -v only, to keep failures readable.
func testLogSink() io.Writer {
	if os.Getenv("LANDFORM_TEST_LOGS") != "" {
		return os.Stderr
	}
	return io.Discard
}

// artifactServer serves tarballs the way source-controller does.
type artifactServer struct {
	dir string
	srv *httptest.Server
	mu  sync.Mutex
	n   int
}

func newArtifactServer(dir string) *artifactServer {
	_ = os.MkdirAll(dir, 0o755)
	return &artifactServer{dir: dir, srv: httptest.NewServer(http.FileServer(http.Dir(dir)))}
}

// publish packs files into a tarball and returns its artifact.
func (s *artifactServer) publish(files map[string]string) *meta.Artifact {
	data := tarball(files)
	s.mu.Lock()
	s.n++
	name := fmt.Sprintf("artifact-%d.tar.gz", s.n)
	s.mu.Unlock()
	if err := os.WriteFile(filepath.Join(s.dir, name), data, 0o644); err != nil {
		panic(err)
	}
	sum := sha256.Sum256(data)
	rev := sha1.Sum(data)
	return &meta.Artifact{
		Path:           name,
		URL:            s.srv.URL + "/" + name,
		Revision:       "main@sha1:" + hex.EncodeToString(rev[:]),
		Digest:         "sha256:" + hex.EncodeToString(sum[:]),
		LastUpdateTime: metav1.Now(),
		Size:           ptr.To(int64(len(data))),
	}
}

func ptrTo[T any](v T) *T { return &v }

func tarball(files map[string]string) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		_ = tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)})
		_, _ = tw.Write([]byte(files[n]))
	}
	_ = tw.Close()
	_ = gz.Close()
	return buf.Bytes()
}

// moduleFiles reads a module directory into a file map for publish.
func moduleFiles(dir string, prefix string) map[string]string {
	files := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			panic(err)
		}
		files[filepath.Join(prefix, e.Name())] = string(b)
	}
	return files
}

// engineVersion is an engine binary's version, from `version -json`.
func engineVersion(path string) (string, error) {
	out, err := exec.Command(path, "version", "-json").Output()
	if err != nil {
		return "", fmt.Errorf("%s version: %w", path, err)
	}
	// OpenTofu may warn about its CLI configuration before the JSON.
	if i := bytes.IndexByte(out, '{'); i > 0 {
		out = out[i:]
	}
	var v struct {
		Version string `json:"terraform_version"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return "", fmt.Errorf("%s version: %w", path, err)
	}
	return v.Version, nil
}
