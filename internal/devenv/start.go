package devenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/devenv/gitserver"
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/testenv"
)

const (
	// FluxNamespace is the Flux controllers' RUNTIME_NAMESPACE.
	FluxNamespace = "flux-system"
	// GitRepoName is the repository seeded with modules/: GitBaseURL/landform.git.
	GitRepoName = "landform"

	startTimeout = 2 * time.Minute
	stopGrace    = 20 * time.Second
)

// starter carries what the start steps share.
type starter struct {
	*Env
	o     Options
	ctx   context.Context
	ports ports
	// runner is the landform-runner binary the controller starts.
	runner string
}

func (s *starter) logPath(name string) string { return filepath.Join(s.StateDir, "logs", name+".log") }

// checkTools fails, naming every missing tool at once, before anything
// starts.
func (s *starter) checkTools() (string, error) {
	var missing []string
	for _, t := range []string{"kube-apiserver", "etcd", "kube-controller-manager", "source-controller", "kustomize-controller",
		"notification-controller", "flux-crds", "flux-kustomize-crds", "flux-notification-crds"} {
		if _, err := os.Stat(filepath.Join(s.o.ToolsDir, t)); err != nil {
			missing = append(missing, t)
		}
	}
	if _, err := os.Stat(s.o.Engine); err != nil {
		missing = append(missing, filepath.Base(s.o.Engine))
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("%s missing in %s: run `make tools` (or point --tools-dir or LANDFORM_TOOLS_DIR at a directory holding them)",
			strings.Join(missing, ", "), s.o.ToolsDir)
	}
	for _, dir := range []string{"modules", filepath.Join("config", "crd", "bases")} {
		if _, err := os.Stat(filepath.Join(s.o.RepoDir, dir)); err != nil {
			return "", fmt.Errorf("%s is not a Landform checkout: it has no %s", s.o.RepoDir, dir)
		}
	}
	for _, b := range []string{"git", "go"} {
		if _, err := exec.LookPath(b); err != nil {
			return "", fmt.Errorf("%s is not on PATH: landform dev needs it (git serves the modules, go builds the provider)", b)
		}
	}
	return s.o.ToolsDir, nil
}

func (s *starter) reservePorts() (string, error) {
	file := portsPath(s.StateDir)
	p, err := readPorts(file)
	if err != nil {
		return "", err
	}
	taken := map[int]bool{}
	var notes []string
	for _, r := range []struct {
		name     string
		asked    int
		recorded *int
		// movable: nothing stored depends on the port for long: the
		// kubeconfig is written again on every start, and source-controller
		// rewrites artifact URLs when it reconciles a source.
		movable bool
	}{
		{"kube-apiserver", s.o.APIServerPort, &p.APIServer, true},
		{"git server", s.o.GitPort, &p.Git, false},
		{"stand-in cloud", s.o.CloudPort, &p.Cloud, false},
		{"artifact server", 0, &p.SourceStorage, true},
	} {
		note, err := reserve(r.name, r.asked, r.recorded, r.movable, file, taken)
		if err != nil {
			return "", err
		}
		if note != "" {
			notes = append(notes, r.name+": "+note)
		}
	}
	if err := writePorts(file, p); err != nil {
		return "", err
	}
	s.ports = p
	if len(notes) > 0 {
		return fmt.Sprintf("api %d, git %d, cloud %d, artifacts %d (%s)", p.APIServer, p.Git, p.Cloud, p.SourceStorage, strings.Join(notes, "; ")), nil
	}
	return fmt.Sprintf("api %d, git %d, cloud %d, artifacts %d", p.APIServer, p.Git, p.Cloud, p.SourceStorage), nil
}

// startControlPlane runs etcd, with its data in the state directory, and
// kube-apiserver on the recorded port, then installs the CRDs. The API
// server's certificates are new on every start; the kubeconfig is written
// again each time.
func (s *starter) startControlPlane() (string, error) {
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, infrav1.AddToScheme, sourcev1.AddToScheme} {
		if err := add(scheme); err != nil {
			return "", err
		}
	}
	dataDir := filepath.Join(s.StateDir, "etcd")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", err
	}
	etcdLog, err := openLog(s.logPath("etcd"))
	if err != nil {
		return "", err
	}
	apiLog, err := openLog(s.logPath("kube-apiserver"))
	if err != nil {
		etcdLog.Close()
		return "", err
	}
	api := &envtest.APIServer{Out: apiLog, Err: apiLog}
	api.SecureServing.Address = "127.0.0.1"
	api.SecureServing.Port = strconv.Itoa(s.ports.APIServer)
	env := &envtest.Environment{
		BinaryAssetsDirectory: s.o.ToolsDir,
		ControlPlane: envtest.ControlPlane{
			Etcd:      &envtest.Etcd{DataDir: dataDir, Out: etcdLog, Err: etcdLog},
			APIServer: api,
		},
		CRDDirectoryPaths: []string{
			filepath.Join(s.o.RepoDir, "config", "crd", "bases"),
			filepath.Join(s.o.ToolsDir, "flux-crds"),
			filepath.Join(s.o.ToolsDir, "flux-kustomize-crds"),
			filepath.Join(s.o.ToolsDir, "flux-notification-crds"),
		},
		ErrorIfCRDPathMissing:    true,
		Scheme:                   scheme,
		UseExistingCluster:       ptr.To(false),
		ControlPlaneStartTimeout: time.Minute,
		ControlPlaneStopTimeout:  stopGrace,
	}
	closeLogs := func() { etcdLog.Close(); apiLog.Close() }
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		closeLogs()
		return "", fmt.Errorf("%w (see %s and %s)", err, s.logPath("etcd"), s.logPath("kube-apiserver"))
	}
	s.onStop("etcd and kube-apiserver", func() error {
		defer closeLogs()
		return env.Stop()
	})
	s.Config = cfg
	s.APIServerURL = strings.TrimSuffix(cfg.Host, "/")
	if s.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return "", err
	}
	if err := placement.WriteKubeconfig(cfg, s.Kubeconfig); err != nil {
		return "", fmt.Errorf("writing the kubeconfig: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: FluxNamespace}}
	if err := s.Client.Create(s.ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating namespace %s: %w", FluxNamespace, err)
	}
	return fmt.Sprintf("%s, %d CRDs", s.APIServerURL, len(env.CRDs)), nil
}

// startGitServer serves StateDir/git, push enabled, seeding landform.git
// with the checkout's modules/ on the first start.
func (s *starter) startGitServer() (string, error) {
	root := filepath.Join(s.StateDir, "git")
	if err := gitserver.Seed(root, GitRepoName, s.o.RepoDir, "modules"); err != nil {
		return "", err
	}
	h, err := gitserver.Handler(root, true)
	if err != nil {
		return "", err
	}
	logFile, err := openLog(s.logPath("git"))
	if err != nil {
		return "", err
	}
	logger := log.New(logFile, "", log.LstdFlags)
	err = s.serve("git server", s.ports.Git, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		logger.Printf("%s %s?%s", r.Method, r.URL.Path, r.URL.RawQuery)
		h.ServeHTTP(w, r)
	}), logger, logFile)
	if err != nil {
		return "", err
	}
	s.GitBaseURL = "http://" + loopback(s.ports.Git)
	s.GitURL = s.GitBaseURL + "/" + GitRepoName + ".git"
	return s.GitURL, nil
}

// serve runs h on a loopback port until Stop, its errors to logger, and
// then closes logFile (at once, when the port cannot be had).
func (s *starter) serve(name string, port int, h http.Handler, logger *log.Logger, logFile *os.File) error {
	ln, err := net.Listen("tcp", loopback(port))
	if err != nil {
		logFile.Close()
		return fmt.Errorf("port %d for the %s: %w", port, name, err)
	}
	srv := &http.Server{Handler: h, ErrorLog: logger, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.fail(fmt.Errorf("%s stopped: %w", name, err))
		}
	}()
	s.onStop(name, func() error {
		defer logFile.Close()
		return shutdown(srv)
	})
	return nil
}

func shutdown(srv *http.Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(ctx)
}

// buildProviders builds providers/landform into the filesystem mirror the
// runners read (cached by hack/build-provider.sh: seconds when unchanged),
// and writes a CLI config that uses it, for running the engine by hand.
func (s *starter) buildProviders() (string, error) {
	mirror := filepath.Join(s.StateDir, "providers")
	logFile, err := openLog(s.logPath("build"))
	if err != nil {
		return "", err
	}
	defer logFile.Close()
	cmd := exec.CommandContext(s.ctx, "bash", filepath.Join(s.o.RepoDir, "hack", "build-provider.sh"), mirror)
	cmd.Dir = s.o.RepoDir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/build-provider.sh %s: %w (see %s)", mirror, err, s.logPath("build"))
	}
	rc := fmt.Sprintf(`# Written by landform dev: providers of %[1]s come from there only.
#   TF_CLI_CONFIG_FILE=%[2]s tofu init
disable_checkpoint = true
provider_installation {
  filesystem_mirror {
    path    = %[1]q
    include = ["registry.terraform.io/landform-dev/*", "registry.opentofu.org/landform-dev/*"]
  }
  direct {
    exclude = ["registry.terraform.io/landform-dev/*", "registry.opentofu.org/landform-dev/*"]
  }
}
`, mirror, filepath.Join(s.StateDir, "terraform.rc"))
	if err := os.WriteFile(filepath.Join(s.StateDir, "terraform.rc"), []byte(rc), 0o644); err != nil {
		return "", err
	}
	return mirror, nil
}

// findRunner picks the runner binary, building ./cmd/runner into the state
// directory when there is none.
func (s *starter) findRunner() (string, error) {
	if s.o.RunnerBinary != "" {
		if _, err := os.Stat(s.o.RunnerBinary); err != nil {
			return "", fmt.Errorf("runner binary: %w", err)
		}
		s.runner = s.o.RunnerBinary
		return s.runner, nil
	}
	if b := filepath.Join(s.o.ToolsDir, "landform-runner"); fileExists(b) {
		s.runner = b
		return b, nil
	}
	b := filepath.Join(s.StateDir, "bin", "landform-runner")
	if fileExists(b) {
		s.runner = b
		return b, nil
	}
	logFile, err := openLog(s.logPath("build"))
	if err != nil {
		return "", err
	}
	defer logFile.Close()
	cmd := exec.CommandContext(s.ctx, "go", "build", "-o", b+".tmp", "./cmd/runner")
	cmd.Dir = s.o.RepoDir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/runner: %w (see %s)", err, s.logPath("build"))
	}
	if err := os.Rename(b+".tmp", b); err != nil {
		return "", err
	}
	s.runner = b
	return "built " + b, nil
}

// startSourceController runs Flux's source-controller with its artifact
// storage in the state directory, on the recorded port.
func (s *starter) startSourceController() (string, error) {
	storage := filepath.Join(s.StateDir, "source-controller")
	if err := os.MkdirAll(storage, 0o700); err != nil {
		return "", err
	}
	addr := loopback(s.ports.SourceStorage)
	return s.startFlux("source-controller", []string{
		"--storage-path=" + storage,
		"--storage-addr=" + addr,
		"--storage-adv-addr=" + addr,
	})
}

// startGarbageCollector runs kube-controller-manager's garbage collector,
// so that owned objects (runner Pods, plans, outputs Secrets) go with their
// owners as in a cluster, and deletionPolicy Orphan is seen to keep what it
// keeps.
func (s *starter) startGarbageCollector() (string, error) {
	const name = "kube-controller-manager"
	p, err := s.startProcess(name, s.logPath(name), filepath.Join(s.o.ToolsDir, name), testenv.GarbageCollectorArgs(s.Kubeconfig), nil)
	if err != nil {
		return "", err
	}
	s.onStop(name, func() error { return p.stop(stopGrace) })
	return fmt.Sprintf("pid %d, logs in %s", p.cmd.Process.Pid, s.logPath(name)), nil
}

func (s *starter) startKustomizeController() (string, error) {
	return s.startFlux("kustomize-controller", nil)
}

// startFlux runs a Flux controller from the tools directory with the
// admin kubeconfig, and waits until it reports ready.
func (s *starter) startFlux(name string, args []string) (string, error) {
	metrics, err := freePort()
	if err != nil {
		return "", err
	}
	health, err := freePort()
	if err != nil {
		return "", err
	}
	args = append(args,
		"--metrics-addr="+loopback(metrics),
		"--health-addr="+loopback(health),
		"--enable-leader-election=false",
	)
	p, err := s.startProcess(name, s.logPath(name), filepath.Join(s.o.ToolsDir, name), args,
		[]string{"RUNTIME_NAMESPACE=" + FluxNamespace, "KUBECONFIG=" + s.Kubeconfig})
	if err != nil {
		return "", err
	}
	s.onStop(name, func() error { return p.stop(stopGrace) })
	if err := p.waitReady(s.ctx, "http://"+loopback(health)+"/readyz", startTimeout); err != nil {
		return "", err
	}
	return fmt.Sprintf("pid %d, logs in %s", p.cmd.Process.Pid, s.logPath(name)), nil
}

// writeFiles writes the samples and env.json, the last steps: env.json
// tells other processes the environment is up.
func (s *starter) writeFiles() (string, error) {
	tf, err := os.ReadFile(filepath.Join(s.o.RepoDir, "config", "samples", "infra_v1alpha1_terraform.yaml"))
	if err != nil {
		return "", err
	}
	repo := &sourcev1.GitRepository{
		TypeMeta:   metav1.TypeMeta{APIVersion: sourcev1.GroupVersion.String(), Kind: sourcev1.GitRepositoryKind},
		ObjectMeta: metav1.ObjectMeta{Name: "landform", Namespace: "default"},
		Spec: sourcev1.GitRepositorySpec{
			URL:       s.GitURL,
			Reference: &sourcev1.GitRepositoryRef{Branch: "main"},
			Interval:  metav1.Duration{Duration: time.Minute},
		},
	}
	b, err := yaml.Marshal(repo)
	if err != nil {
		return "", err
	}
	// status: {} is noise in a file meant to be applied.
	b = []byte(strings.Replace(string(b), "status: {}\n", "", 1))
	samples := "# config/samples for `landform dev`: the GitRepository on the dev git server.\n" +
		"# kubectl apply -f " + s.Samples + "\n" + string(b) + "---\n" + string(tf)
	if err := os.WriteFile(s.Samples, []byte(samples), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(s.Alerts, []byte(s.alertsYAML()), 0o644); err != nil {
		return "", err
	}
	info, err := json.MarshalIndent(Info{
		PID:          os.Getpid(),
		Kubeconfig:   s.Kubeconfig,
		APIServerURL: s.APIServerURL,
		GitURL:       s.GitURL,
		CloudURL:     s.CloudURL,
		Samples:      s.Samples,
		EventsURL:    s.EventsURL,
		Alerts:       s.Alerts,
	}, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(s.StateDir, "env.json"), append(info, '\n'), 0o644); err != nil {
		return "", err
	}
	return s.Samples + ", " + s.Alerts, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
