package packaging

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/landform-dev/landform/internal/testenv"
)

// env is the API server every test in this package applies to.
var env *testenv.Env

func TestMain(m *testing.M) {
	e, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: cannot start the test API server:", err)
		os.Exit(1)
	}
	// The chart's optional ServiceMonitor is checked against the real
	// Prometheus Operator CRD, which `make tools` fetches.
	crds := filepath.Join(repoRoot(), "bin", "monitoring-crds")
	if _, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{Paths: []string{crds}, ErrorIfPathMissing: true}); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: installing the ServiceMonitor CRD from %s (run `make tools`): %v\n", crds, err)
		_ = e.Stop()
		os.Exit(1)
	}
	env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
	os.Exit(code)
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// path joins parts under the repository root.
func path(parts ...string) string {
	return filepath.Join(append([]string{repoRoot()}, parts...)...)
}

// tool finds a pinned tool: $envVar, else bin/name. Missing is a failure:
// a test that silently skips would let CI pass by checking nothing.
// make is the command that puts it in bin/.
func tool(t testing.TB, envVar, name, make string) string {
	t.Helper()
	p, from := os.Getenv(envVar), envVar+"="+os.Getenv(envVar)
	if p == "" {
		p, from = path("bin", name), "bin/"+name+" ("+envVar+" is unset)"
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s not found at %s: run `%s`, or set %s", name, from, make, envVar)
	}
	return p
}

func helmBin(t testing.TB) string { return tool(t, "LANDFORM_HELM", "helm", "make tools") }
func kustomizeBin(t testing.TB) string {
	return tool(t, "LANDFORM_KUSTOMIZE", "kustomize", "make tools")
}

// run runs a command in the repository root and returns its stdout; it
// fails the test with stderr when the command fails.
func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := runErr(nil, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v", filepath.Base(name), strings.Join(args, " "), err)
	}
	return out
}

// runErr runs a command in the repository root with extra environment.
func runErr(extraEnv []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(), extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w\n%s%s", err, stderr.String(), stdout.String())
	}
	return stdout.String(), nil
}

// helmEnv isolates helm from the user's configuration and repositories.
func helmEnv(t testing.TB) []string {
	dir := t.TempDir()
	return []string{
		"HELM_CACHE_HOME=" + filepath.Join(dir, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"HELM_DATA_HOME=" + filepath.Join(dir, "data"),
	}
}

const releaseNamespace = "landform-system"

// helmTemplate renders the chart in releaseNamespace with the CRDs.
func helmTemplate(t testing.TB, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := runErr(helmEnv(t), helmBin(t), append([]string{"template", "landform", "charts/landform",
		"--namespace", releaseNamespace, "--include-crds"}, args...)...)
	if err != nil {
		t.Fatalf("helm template %v: %v", args, err)
	}
	return decode(t, out)
}

// kustomizeBuild builds a kustomization directory.
func kustomizeBuild(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	return decode(t, run(t, kustomizeBin(t), "build", dir))
}

// decode splits a multi-document YAML stream into objects.
func decode(t testing.TB, s string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(s)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading YAML: %v", err)
		}
		var m map[string]any
		if err := utilyaml.Unmarshal(doc, &m); err != nil {
			t.Fatalf("decoding YAML: %v\n%s", err, doc)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	if len(objs) == 0 {
		t.Fatalf("no objects in:\n%s", s)
	}
	return objs
}

// readObjects decodes one YAML file of the repository.
func readObjects(t testing.TB, parts ...string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path(parts...))
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, string(b))
}

func key(o *unstructured.Unstructured) string {
	k := o.GetKind() + "/"
	if o.GetNamespace() != "" {
		k += o.GetNamespace() + "/"
	}
	return k + o.GetName()
}

// checkObjects says which of the objects' keys differ from want's, which
// are the controller's in ns (every installation has them) and extra.
func checkObjects(t *testing.T, objs []*unstructured.Unstructured, ns string, extra ...string) {
	t.Helper()
	want := append([]string{
		"ClusterRole/landform-controller",
		"ClusterRoleBinding/landform-controller",
		"CustomResourceDefinition/terraforms.infra.landform.dev",
		"Deployment/" + ns + "/landform-controller",
		"Role/" + ns + "/landform-leader-election",
		"RoleBinding/" + ns + "/landform-leader-election",
		"Service/" + ns + "/landform-controller-metrics",
		"ServiceAccount/" + ns + "/landform-controller",
	}, extra...)
	sort.Strings(want)
	if diff := cmp.Diff(want, keys(objs)); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
}

// keys lists the objects as Kind/namespace/name, sorted.
func keys(objs []*unstructured.Unstructured) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, key(o))
	}
	sort.Strings(ks)
	return ks
}

// find returns the one object of that kind and name.
func find(t testing.TB, objs []*unstructured.Unstructured, kind, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == namespace && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s/%s among %v", kind, namespace, name, keys(objs))
	return nil
}

// into converts an unstructured object into a typed one.
func into[T any](t testing.TB, o *unstructured.Unstructured) *T {
	t.Helper()
	var v T
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &v, true); err != nil {
		t.Fatalf("converting %s: %v", key(o), err)
	}
	return &v
}

// ensureNamespace creates a namespace (for real) unless it exists.
func ensureNamespace(t testing.TB, name string, labels map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := env.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}

// dryRunApply applies every object with server-side apply and dry run:
// the API server validates each against its schema (built-in types and
// CRDs alike, unknown fields included) and runs admission, and stores
// nothing. Namespaces among the objects are created for real first, as
// the namespaced objects need them.
func dryRunApply(t testing.TB, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			ensureNamespace(t, o.GetName(), o.GetLabels())
		}
	}
	for _, o := range objs {
		if err := dryRunApplyOne(o); err != nil {
			t.Errorf("server-side dry run of %s: %v", key(o), err)
		}
	}
}

func dryRunApplyOne(o *unstructured.Unstructured) error {
	return env.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
		client.DryRunAll, client.ForceOwnership, client.FieldOwner("landform-packaging-test"))
}

// apply applies objects for real (server-side apply).
func apply(t testing.TB, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
			client.ForceOwnership, client.FieldOwner("landform-packaging-test")); err != nil {
			t.Fatalf("applying %s: %v", key(o), err)
		}
	}
}

// kubeconfig writes a kubeconfig for the test API server; with as, it
// impersonates that user (and groups).
func kubeconfig(t testing.TB, as string, groups ...string) string {
	t.Helper()
	cfg := env.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
		Impersonate:           as,
		ImpersonateGroups:     groups,
	}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	kc.CurrentContext = "envtest"
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p); err != nil {
		t.Fatal(err)
	}
	return p
}
