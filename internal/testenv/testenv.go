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
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

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
	bin, err := assets()
	if err != nil {
		return nil, err
	}
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, sourcev1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
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
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest with binaries from %s: %w", bin, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &Env{Config: cfg, Scheme: scheme, Client: c, env: env}, nil
}

// Stop stops the API server.
func (e *Env) Stop() error {
	return e.env.Stop()
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
