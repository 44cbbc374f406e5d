// Package testenv is the one harness of Landform's tests, suites and bench.
// It starts a real kube-apiserver and etcd (envtest) with the Landform and
// Flux source CRDs installed; finds the programs a suite runs (Tool,
// ToolDir); runs the real landform-controller binary as a child process
// (Controller); serves source artifacts (Artifacts); and describes objects
// for failure messages (Describe, Events).
//
// The API server's binaries come from KUBEBUILDER_ASSETS, or the
// repository's bin/ where `make tools` puts them. For the integration tests
// (Main) a missing binary is an error, never a skip, so a misconfigured CI
// cannot pass by testing nothing; the end-to-end suites follow Tool's rule,
// which fails under make and skips a plain `go test`.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// Env is a running API server and a direct (uncached) client to it.
type Env struct {
	Config *rest.Config
	Scheme *k8sruntime.Scheme
	Client client.Client

	env *envtest.Environment
	ns  atomic.Int32
	// certDir holds a restartable API server's certificates.
	certDir string
}

// repoRoot is found from this file's location, so tests work from any
// package directory.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// assets returns the directory holding kube-apiserver and etcd:
// KUBEBUILDER_ASSETS, else the repository's bin/.
func assets() (string, error) {
	dir, err := ToolDir("KUBEBUILDER_ASSETS", "kube-apiserver", "etcd")
	if err != nil {
		return "", fmt.Errorf("envtest: %w", err)
	}
	return dir, nil
}

// Start starts the API server and installs the CRDs.
func Start() (*Env, error) {
	return start("", nil)
}

// StartWith is Start with extra kube-apiserver flags, name (without the
// dashes) to value: an audit log for the bench, say.
func StartWith(apiServerFlags map[string]string) (*Env, error) {
	return start("", apiServerFlags)
}

// StartRestartable is Start with an API server that StopAPIServer and
// StartAPIServer stop and start again on the same address, with the same
// certificates (its serving certificate, client CA, service account
// keys) and the same etcd, which keeps running: clients, kubeconfigs and
// tokens from before the stop work after it, as after a kube-apiserver
// restart in a cluster. Its certificates live in a directory of its own,
// which envtest would otherwise remove (and generate anew) at every stop.
func StartRestartable() (*Env, error) {
	dir, err := os.MkdirTemp("", "landform-apiserver-")
	if err != nil {
		return nil, err
	}
	e, err := start(dir, nil)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return e, nil
}

// newScheme knows the Kubernetes, Landform and Flux source types.
func newScheme() (*k8sruntime.Scheme, error) {
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, sourcev1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

func start(certDir string, apiServerFlags map[string]string) (*Env, error) {
	bin, err := assets()
	if err != nil {
		return nil, err
	}
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	root := repoRoot()
	env := &envtest.Environment{
		BinaryAssetsDirectory: bin,
		CRDDirectoryPaths: []string{
			filepath.Join(root, "config", "crd", "bases"),
			filepath.Join(root, "bin", "flux-crds"),
		},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	if certDir != "" {
		// A directory of envtest's own choosing is removed at every stop,
		// and a new CA generated at the next start.
		env.ControlPlane.APIServer = &envtest.APIServer{CertDir: certDir}
	}
	for name, value := range apiServerFlags {
		env.ControlPlane.GetAPIServer().Configure().Set(name, value)
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest with binaries from %s: %w", bin, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &Env{Config: cfg, Scheme: scheme, Client: c, env: env, certDir: certDir}, nil
}

// Stop stops the API server.
func (e *Env) Stop() error {
	err := e.env.Stop()
	if e.certDir != "" {
		os.RemoveAll(e.certDir)
	}
	return err
}

// apiServerStopTimeout is how long a stopping kube-apiserver may drain
// before it is killed: with clients watching it, it takes longer than
// envtest's own 20 s, which then reports a failure.
const apiServerStopTimeout = 10 * time.Second

// StopAPIServer stops the kube-apiserver of an Env from StartRestartable:
// SIGTERM, SIGKILL when it has not exited after apiServerStopTimeout. It
// returns once the process has exited and nothing listens on its port any
// more; etcd keeps running.
func (e *Env) StopAPIServer() error {
	if e.certDir == "" {
		return errors.New("the API server of this Env cannot be restarted: use StartRestartable")
	}
	s := e.env.ControlPlane.APIServer
	// The kill is ours, not envtest's: when envtest's Stop times out, it
	// kills the process but still counts it as started, and its next
	// Start then returns at once without starting anything. Given time
	// enough, its Stop sees the killed process exit and forgets it.
	s.StopTimeout = apiServerStopTimeout + time.Minute
	kill := time.AfterFunc(apiServerStopTimeout, func() { killAPIServer(e.certDir) })
	defer kill.Stop()
	if err := s.Stop(); err != nil {
		return err
	}
	addr := net.JoinHostPort(s.SecureServing.Address, s.SecureServing.Port)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return nil
		}
		c.Close()
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver still listens on %s after it was stopped", addr)
		}
	}
}

// killAPIServer SIGKILLs the kube-apiserver serving from certDir (its
// --cert-dir), found in /proc.
func killAPIServer(certDir string) {
	for pid, cmdline := range ProcFiles("cmdline") {
		args := strings.Split(string(cmdline), "\x00")
		if filepath.Base(args[0]) == "kube-apiserver" && slices.Contains(args, "--cert-dir="+certDir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// StartAPIServer starts the kube-apiserver StopAPIServer stopped, on the
// same port and certificates, and returns once it is healthy.
func (e *Env) StartAPIServer() error {
	if e.certDir == "" {
		return errors.New("the API server of this Env cannot be restarted: use StartRestartable")
	}
	return e.env.ControlPlane.APIServer.Start()
}

// Main runs a package's tests against a fresh Env stored in *env, and
// exits non-zero with the reason when the Env cannot start.
func Main(m *testing.M, env **Env) {
	e, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: cannot start the test API server:", err)
		os.Exit(1)
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
	os.Exit(code)
}

// Namespace creates a fresh namespace for one test. Envtest runs no
// namespace controller, so namespaces are not deleted afterwards.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("test-%d", e.ns.Add(1))}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}

// Owner creates a minimal Terraform object (Terraform) in a namespace of
// its own: the owner of the Secrets a store test writes.
func (e *Env) Owner(t testing.TB, name string) *v1alpha1.Terraform {
	t.Helper()
	return e.Terraform(t, e.Namespace(t), name)
}

// Kubeconfig writes a kubeconfig file that reaches the API server as
// Config does, in a directory of t's, and returns its path.
func (e *Env) Kubeconfig(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, e.env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Terraform creates a minimal Terraform object, to own Secrets in tests.
func (e *Env) Terraform(t testing.TB, namespace, name string) *v1alpha1.Terraform {
	t.Helper()
	tf := &v1alpha1.Terraform{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1alpha1.TerraformSpec{
			SourceRef: v1alpha1.SourceReference{Kind: sourcev1.GitRepositoryKind, Name: "infra"},
		},
	}
	if err := e.Client.Create(context.Background(), tf); err != nil {
		t.Fatalf("creating Terraform %s/%s: %v", namespace, name, err)
	}
	return tf
}
