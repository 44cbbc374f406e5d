package placement

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/certs"
	"github.com/landform-dev/landform/internal/fakekubelet"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/testenv"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// The Pod placement suite: a real API server (envtest), the real runner
// binary started by a fake kubelet for every runner Pod, and a real
// OpenTofu.
var (
	env         *testenv.Env
	fake        *fakekubelet.Kubelet
	certManager *certs.Manager
	// controllerNS holds the runner CA Secret.
	controllerNS = "landform-system"
	// mirror is the provider filesystem mirror in the runner image.
	mirror = "/opt/landform/providers"
	// kubeconfig lets runners reach envtest (in a cluster they use the
	// in-cluster configuration).
	kubeconfig string
	// port is the runners' port: every fake Pod has its own loopback IP.
	port       int
	runnerLogs = &testenv.SyncBuffer{}
	// runnerBinary is the landform-runner the tests start.
	runnerBinary string
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "landform-placement-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(tmp)

	engine, err := testenv.Tool("tofu", "LANDFORM_TOFU")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: Pod placement tests need OpenTofu:", err)
		return 1
	}
	// The runner image has tofu on its PATH; so do the fake Pods.
	pathDir := filepath.Join(tmp, "path")
	if err := os.MkdirAll(pathDir, 0o755); err != nil {
		panic(err)
	}
	if err := os.Symlink(engine, filepath.Join(pathDir, "tofu")); err != nil {
		panic(err)
	}
	runnerBin, err := testenv.RunnerBinary(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	hostMirror := filepath.Join(tmp, "providers")
	if err := testenv.BuildProviderMirror(hostMirror); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}

	e, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: cannot start the test API server:", err)
		return 1
	}
	defer func() { _ = e.Stop() }()
	env = e
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controllerNS}}); err != nil {
		panic(err)
	}
	if certManager, err = certs.New(ctx, env.Client, certs.Options{Namespace: controllerNS}); err != nil {
		panic(err)
	}
	kubeconfig = filepath.Join(tmp, "kubeconfig")
	if err := WriteKubeconfig(env.Config, kubeconfig); err != nil {
		panic(err)
	}
	if port, err = freePort(); err != nil {
		panic(err)
	}

	var logs io.Writer = runnerLogs
	if os.Getenv("LANDFORM_TEST_LOGS") != "" {
		logs = io.MultiWriter(runnerLogs, os.Stderr)
	}
	fake = fakekubelet.New(fakekubelet.Options{
		Client:       env.Client,
		RunnerBinary: runnerBin,
		Path:         pathDir + string(os.PathListSeparator) + os.Getenv("PATH"),
		Dir:          filepath.Join(tmp, "kubelet"),
		Image:        map[string]string{mirror: hostMirror},
		Logs:         logs,
	})
	kubeletDone := make(chan struct{})
	go func() {
		defer close(kubeletDone)
		fake.Run(ctx)
	}()
	runnerBinary = runnerBin
	code := m.Run()
	cancel()
	<-kubeletDone
	if code != 0 && os.Getenv("LANDFORM_TEST_LOGS") == "" {
		fmt.Fprintf(os.Stderr, "runner and kubelet output (LANDFORM_TEST_LOGS=1 streams it):\n%s", runnerLogs.String())
	}
	return code
}

func freePort() (int, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port, nil
}

// newPodPlacer is the placer under test, configured as the controller
// configures it, with the fake Pods' port.
func newPodPlacer() *Pod {
	return &Pod{
		Client:          env.Client,
		Certs:           certManager,
		Image:           "ghcr.io/landform-dev/landform-runner:test",
		StartTimeout:    time.Minute,
		Grace:           10 * time.Second,
		ProviderMirrors: []string{mirror},
		Port:            port,
	}
}

// runnerNamespace creates a namespace, with the runner ServiceAccount
// unless withoutAccount.
func runnerNamespace(t *testing.T, withAccount bool) string {
	t.Helper()
	ns := env.Namespace(t)
	if withAccount {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "landform-runner"}}
		if err := env.Client.Create(context.Background(), sa); err != nil {
			t.Fatal(err)
		}
	}
	return ns
}

// runnerPods lists the runner Pods in namespace that are not being deleted.
func runnerPods(t *testing.T, namespace string) []corev1.Pod {
	t.Helper()
	return slices.DeleteFunc(allPods(t, namespace), func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
}

// allPods lists every Pod in namespace, deleting or not.
func allPods(t *testing.T, namespace string) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := env.Client.List(context.Background(), &pods, client.InNamespace(namespace), client.MatchingLabels{nameLabel: runnerPodValue}); err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// eventually polls cond until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type tarball struct {
	data   []byte
	digest string
}

// moduleTarball tars files (name: content) or, with dir, a directory.
func moduleTarball(t *testing.T, dir string, files map[string]string) tarball {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	data, digest := testenv.TarDir(t, dir)
	return tarball{data: data, digest: digest}
}

// workspaceSpec is a workspace for tb at the module root; the state is in
// the kubernetes backend of obj's namespace, reached through kubeconfig.
func workspaceSpec(t *testing.T, obj *infrav1.Terraform, tb tarball, vars map[string]any) *runnerpb.WorkspaceSpec {
	t.Helper()
	varsJSON, err := json.Marshal(vars)
	if err != nil {
		t.Fatal(err)
	}
	return &runnerpb.WorkspaceSpec{
		TarballDigest: tb.digest,
		TarballSize:   int64(len(tb.data)),
		Path:          ".",
		VarsJson:      varsJSON,
		Workspace:     "default",
		BackendConfig: map[string]string{"secret_suffix": names.SecretSuffix(obj), "namespace": obj.Namespace, "config_path": kubeconfig},
	}
}
