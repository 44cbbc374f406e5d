package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// now is the CLI's clock in tests: an hour after the objects are created,
// so that their age prints as "60m"; times written into status are set
// relative to it.
var now = time.Now().Add(time.Hour + 30*time.Second).Truncate(time.Second)

func ago(d time.Duration) *metav1.Time {
	t := metav1.NewTime(now.Add(-d))
	return &t
}

var (
	kubeconfigOnce sync.Once
	kubeconfigPath string
)

// kubeconfig writes a kubeconfig for the test API server, so that the CLI
// connects through its real --kubeconfig flag.
func kubeconfig(t testing.TB) string {
	t.Helper()
	kubeconfigOnce.Do(func() {
		dir, err := os.MkdirTemp("", "landform-cli-test")
		if err != nil {
			t.Fatal(err)
		}
		kubeconfigPath = filepath.Join(dir, "kubeconfig")
		if err := writeKubeconfig(env.Config, kubeconfigPath); err != nil {
			t.Fatal(err)
		}
	})
	return kubeconfigPath
}

func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test", Namespace: "default"}
	kc.CurrentContext = "test"
	return clientcmd.WriteToFile(*kc, path)
}

// cli is one run of the command line.
type cli struct {
	args   []string
	stdin  string
	stdout string
	stderr string
	err    error
}

// transcript is what golden files hold: the command, its outputs and error.
func (r cli) transcript() string {
	var b strings.Builder
	b.WriteString("$ landform " + strings.Join(r.args, " ") + "\n")
	if r.stdin != "" {
		b.WriteString("[stdin]\n" + r.stdin)
	}
	b.WriteString(r.stdout)
	if r.stderr != "" {
		b.WriteString("[stderr]\n" + r.stderr)
	}
	if r.err != nil {
		b.WriteString("[error]\n" + r.err.Error() + "\n")
	}
	// Exit codes other than 0 and 1 are part of a command's contract.
	if code := ExitCode(r.err); code != ExitOK && code != ExitError {
		fmt.Fprintf(&b, "[exit %d]\n", code)
	}
	return b.String()
}

// run runs the CLI with args (after --kubeconfig) and stdin.
func run(t testing.TB, stdin string, args ...string) cli {
	t.Helper()
	return runContext(context.Background(), t, stdin, args...)
}

// runIn runs the CLI as run does, from the directory dir, so that the
// paths on its command line are relative to dir, as a user's are to
// theirs.
func runIn(t testing.TB, dir, stdin string, args ...string) cli {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := os.Chdir(wd); err != nil {
			t.Fatal(err)
		}
	}()
	return run(t, stdin, args...)
}

func runContext(ctx context.Context, t testing.TB, stdin string, args ...string) cli {
	t.Helper()
	var out, errOut testenv.SyncBuffer
	err := Execute(ctx, Options{
		Streams:      genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut},
		Now:          func() time.Time { return now },
		PollInterval: 50 * time.Millisecond,
	}, append([]string{"--kubeconfig", kubeconfig(t)}, args...))
	return cli{args: args, stdin: stdin, stdout: out.String(), stderr: errOut.String(), err: err}
}

// timestamps are replaced in golden files where the time is the API
// server's or the wall clock's, not the test's clock.
var timestamps = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)

func normalize(s string) string { return timestamps.ReplaceAllString(s, "TIME") }

// golden compares got with testdata/<name>.golden, or rewrites it with -update.
func golden(t testing.TB, name, got string) {
	t.Helper()
	testenv.Golden(t, filepath.Join("testdata", name+".golden"), got, *update)
}

// repoRoot is the repository's top directory.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// bareAPIServer starts an API server of the test's own, without any CRD,
// stopped at the test's end, and writes a kubeconfig file for it.
func bareAPIServer(t *testing.T) (cfg *rest.Config, kubeconfig string) {
	t.Helper()
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join(repoRoot(), "bin")
	}
	bare := &envtest.Environment{BinaryAssetsDirectory: dir}
	cfg, err := bare.Start()
	if err != nil {
		t.Fatalf("starting an API server from %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = bare.Stop() })
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := writeKubeconfig(cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	return cfg, kubeconfig
}

// namespace creates a namespace with a fixed name, so that golden files
// do not depend on test order.
func namespace(t testing.TB, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	return name
}

// terraform creates a Terraform object, then writes the status that set
// gives it through the status subresource, as the controller does.
func terraform(t testing.TB, ns, name string, set func(*v1alpha1.Terraform)) *v1alpha1.Terraform {
	t.Helper()
	ctx := context.Background()
	obj := &v1alpha1.Terraform{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.TerraformSpec{
			SourceRef: v1alpha1.SourceReference{Kind: "GitRepository", Name: "infra"},
			Path:      "./modules/" + name,
		},
	}
	if set == nil {
		set = func(*v1alpha1.Terraform) {}
	}
	set(obj)
	status := obj.Status
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatalf("creating Terraform %s/%s: %v", ns, name, err)
	}
	if reflect.DeepEqual(status, v1alpha1.TerraformStatus{}) {
		return obj // never reconciled
	}
	if status.ObservedGeneration == 0 {
		status.ObservedGeneration = obj.Generation
	}
	for i := range status.Conditions {
		status.Conditions[i].ObservedGeneration = obj.Generation
	}
	obj.Status = status
	if err := env.Client.Status().Update(ctx, obj); err != nil {
		t.Fatalf("writing the status of Terraform %s/%s: %v", ns, name, err)
	}
	return obj
}

// condition builds a condition that changed d before now.
func condition(typ string, status metav1.ConditionStatus, reason, message string, d time.Duration) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, LastTransitionTime: *ago(d)}
}

func setCondition(obj *v1alpha1.Terraform, c metav1.Condition) {
	apimeta.SetStatusCondition(&obj.Status.Conditions, c)
}

// snapshot is an object as the API server has it, without what every
// write changes (resourceVersion, managedFields).
func snapshot(t testing.TB, obj client.Object) map[string]any {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(v1alpha1.TerraformKind))
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), u); err != nil {
		t.Fatal(err)
	}
	unstructured.RemoveNestedField(u.Object, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	return u.Object
}

// withoutAnnotation returns the snapshot minus one annotation (and the
// annotations map when that was the only one).
func withoutAnnotation(s map[string]any, key string) map[string]any {
	ann, _, _ := unstructured.NestedStringMap(s, "metadata", "annotations")
	delete(ann, key)
	if len(ann) == 0 {
		unstructured.RemoveNestedField(s, "metadata", "annotations")
	} else {
		_ = unstructured.SetNestedStringMap(s, ann, "metadata", "annotations")
	}
	return s
}

// onlyAnnotationChanged checks that between before and after the object
// changed only by annotation key, which now has value want.
func onlyAnnotationChanged(t testing.TB, before, after map[string]any, key, want string) {
	t.Helper()
	got, _, _ := unstructured.NestedString(after, "metadata", "annotations", key)
	if want != "" && got != want {
		t.Errorf("annotation %s = %q, want %q", key, got, want)
	}
	if diff := cmp.Diff(withoutAnnotation(before, key), withoutAnnotation(after, key)); diff != "" {
		t.Errorf("the object changed beyond annotation %s (-before +after):\n%s", key, diff)
	}
}

func deepCopyMap(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}

func streams(out, errOut io.Writer) genericiooptions.IOStreams {
	return genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errOut}
}

// background is a command running while its test acts as the controller.
type background struct {
	args        []string
	out, errOut testenv.SyncBuffer
	done        chan error
	cancel      context.CancelFunc
}

// start runs the CLI in the background.
func start(t *testing.T, args ...string) *background {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &background{args: args, done: make(chan error, 1), cancel: cancel}
	kc := kubeconfig(t)
	go func() {
		b.done <- Execute(ctx, Options{
			Streams:      streams(&b.out, &b.errOut),
			Now:          func() time.Time { return now },
			PollInterval: 50 * time.Millisecond,
		}, append([]string{"--kubeconfig", kc}, args...))
	}()
	t.Cleanup(cancel)
	return b
}

// waitOutput waits until stdout satisfies ok.
func (b *background) waitOutput(t *testing.T, ok func(string) bool) {
	t.Helper()
	waitFor(t, &b.out, ok)
}

// waitErrOutput waits until stderr satisfies ok.
func (b *background) waitErrOutput(t *testing.T, ok func(string) bool) {
	t.Helper()
	waitFor(t, &b.errOut, ok)
}

// result waits for the command to end by itself.
func (b *background) result(t *testing.T) cli {
	t.Helper()
	select {
	case err := <-b.done:
		return cli{args: b.args, stdout: b.out.String(), stderr: b.errOut.String(), err: err}
	case <-time.After(time.Minute):
		t.Fatalf("the command did not end; output so far:\n%s", b.out.String())
	}
	return cli{}
}

// stop interrupts the command (Ctrl-C) and returns its result.
func (b *background) stop(t *testing.T) cli {
	t.Helper()
	b.cancel()
	return b.result(t)
}
