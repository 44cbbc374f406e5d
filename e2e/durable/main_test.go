// Package durable proves that runs survive the controller: the real
// landform-controller binary is stopped or killed mid-apply, against a real
// API server, with real runner processes and a real OpenTofu, and the tests
// check what a user would check afterwards.
package durable

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/testenv"
)

var (
	env        *testenv.Env
	kube       *kubernetes.Clientset
	kubeconfig string
	bins       struct{ controller, runner, tofu string }
	artifacts  *httptest.Server
	artDir     string
)

func TestMain(m *testing.M) { os.Exit(runSuite(m)) }

func runSuite(m *testing.M) int {
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	tmp, err := os.MkdirTemp("", "landform-durable-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(tmp)
	bins.tofu = envOr("LANDFORM_TOFU", filepath.Join(root, "bin", "tofu"))
	if _, err := os.Stat(bins.tofu); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: the durability tests need OpenTofu at %s: run `make tools` (%v)\n", bins.tofu, err)
		return 1
	}
	for _, b := range []struct {
		path *string
		env  string
		pkg  string
	}{{&bins.controller, "LANDFORM_CONTROLLER_BIN", "cmd/controller"}, {&bins.runner, "LANDFORM_RUNNER_BIN", "cmd/runner"}} {
		if *b.path = os.Getenv(b.env); *b.path != "" {
			continue
		}
		*b.path = filepath.Join(tmp, filepath.Base(b.pkg))
		if out, err := exec.Command("go", "build", "-o", *b.path, filepath.Join(root, b.pkg)).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: building %s: %v\n%s", b.pkg, err, out)
			return 1
		}
	}
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: cannot start the test API server:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	if kube, err = kubernetes.NewForConfig(env.Config); err != nil {
		panic(err)
	}
	kubeconfig = filepath.Join(tmp, "kubeconfig")
	if err := placement.WriteKubeconfig(env.Config, kubeconfig); err != nil {
		panic(err)
	}
	artDir = filepath.Join(tmp, "artifacts")
	_ = os.MkdirAll(artDir, 0o755)
	artifacts = httptest.NewServer(http.FileServer(http.Dir(artDir)))
	defer artifacts.Close()
	return m.Run()
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// slowModule: each create appends a line to var.effects and then sleeps
// var.sleep seconds; the number of lines is the number of creates.
const slowModule = `
variable "effects" { type = string }
variable "sleep" { type = number }
resource "terraform_data" "this" {
  input = var.effects
  provisioner "local-exec" {
    command = "echo created >> ${var.effects} && sleep ${var.sleep}"
  }
}
output "effects" { value = terraform_data.this.output }
`

// controller is the real landform-controller as a child process.
type controller struct {
	cmd  *exec.Cmd
	logs *testenv.SyncBuffer
	done chan struct{}
	err  error
}

// startController runs landform-controller with local runners.
func startController(t *testing.T, workDir string, args ...string) *controller {
	t.Helper()
	c := &controller{logs: &testenv.SyncBuffer{}, done: make(chan struct{})}
	c.cmd = exec.Command(bins.controller, append([]string{
		"--runner=local", "--runner-binary", bins.runner, "--engine", bins.tofu,
		"--work-dir", workDir, "--metrics-addr=0", "--health-addr=0",
		"--zap-log-level=debug",
	}, args...)...)
	c.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "CHECKPOINT_DISABLE=1")
	var out io.Writer = c.logs
	if os.Getenv("LANDFORM_TEST_LOGS") != "" {
		out = io.MultiWriter(c.logs, os.Stderr)
	}
	c.cmd.Stdout, c.cmd.Stderr = out, out
	NewWithT(t).Expect(c.cmd.Start()).To(Succeed())
	go func() { c.err = c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.done
		if t.Failed() && os.Getenv("LANDFORM_TEST_LOGS") == "" {
			t.Logf("controller output:\n%s", c.logs.String())
		}
	})
	return c
}

// waitExit waits for the controller to exit and returns how it ended.
func (c *controller) waitExit(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-c.done:
		return c.err
	case <-time.After(timeout):
		t.Fatalf("the controller did not exit within %s", timeout)
		return nil
	}
}

func (c *controller) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	NewWithT(t).Expect(c.cmd.Process.Signal(sig)).To(Succeed())
}

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T) string { return env.Namespace(t) }

// publish serves files as a tarball artifact and points a GitRepository at it.
func publish(t *testing.T, ns string, files map[string]string) {
	t.Helper()
	g := NewWithT(t)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		g.Expect(tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})).To(Succeed())
		_, _ = tw.Write([]byte(body))
	}
	g.Expect(tw.Close()).To(Succeed())
	g.Expect(gz.Close()).To(Succeed())
	sum := sha256.Sum256(buf.Bytes())
	name := ns + ".tar.gz"
	g.Expect(os.WriteFile(filepath.Join(artDir, name), buf.Bytes(), 0o644)).To(Succeed())

	ctx := context.Background()
	repo := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "repo"},
		Spec:       sourcev1.GitRepositorySpec{URL: "https://example.invalid/repo.git", Interval: metav1.Duration{Duration: time.Hour}},
	}
	g.Expect(env.Client.Create(ctx, repo)).To(Succeed())
	repo.Status.Artifact = &meta.Artifact{
		Path: name, URL: artifacts.URL + "/" + name,
		Revision:       "main@sha1:" + hex.EncodeToString(sum[:20]),
		Digest:         "sha256:" + hex.EncodeToString(sum[:]),
		LastUpdateTime: metav1.Now(),
		Size:           ptrTo(int64(buf.Len())),
	}
	repo.Status.ObservedGeneration = repo.Generation
	conditions.MarkTrue(repo, meta.ReadyCondition, meta.SucceededReason, "stored artifact")
	g.Expect(env.Client.Status().Update(ctx, repo)).To(Succeed())
}

func ptrTo[T any](v T) *T { return &v }

// newSlowTerraform creates an auto-approved object on the slow module.
func newSlowTerraform(t *testing.T, ns, name, effects string, sleep int, mutate ...func(*infrav1.Terraform)) *infrav1.Terraform {
	t.Helper()
	jsonOf := func(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }
	tf := &infrav1.Terraform{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: infrav1.TerraformSpec{
			SourceRef:     infrav1.SourceReference{Kind: sourcev1.GitRepositoryKind, Name: "repo"},
			Path:          "./",
			Interval:      metav1.Duration{Duration: time.Hour},
			RetryInterval: &metav1.Duration{Duration: 2 * time.Second},
			ApprovePlan:   infrav1.ApprovePlanAuto,
			Vars: []infrav1.Variable{
				{Name: "effects", Value: jsonOf(fmt.Sprintf("%q", effects))},
				{Name: "sleep", Value: jsonOf(fmt.Sprint(sleep))},
			},
			WriteOutputsToSecret: &infrav1.WriteOutputsToSecretSpec{Name: name + "-outputs"},
		},
	}
	for _, m := range mutate {
		m(tf)
	}
	NewWithT(t).Expect(env.Client.Create(context.Background(), tf)).To(Succeed())
	return tf
}

func get(g Gomega, tf *infrav1.Terraform) *infrav1.Terraform {
	out := &infrav1.Terraform{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(tf), out)).To(Succeed())
	return out
}

func creates(path string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), "created")
}

// stateLock is tf's state lock; nil when free.
func stateLock(g Gomega, tf *infrav1.Terraform) *statelock.LockInfo {
	info, err := statelock.Read(context.Background(), kube.CoordinationV1().Leases(tf.Namespace), statelock.LeaseName(tf.GetStateSecretName()))
	g.Expect(err).NotTo(HaveOccurred())
	return info
}

func secretData(g Gomega, ns, name string) map[string][]byte {
	s := &corev1.Secret{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
	return s.Data
}

// settled checks what a user checks: Ready, outputs in the Secret, no run
// in flight, no lock left.
func settled(g Gomega, tf *infrav1.Terraform, effects string) {
	obj := get(g, tf)
	g.Expect(conditions.IsReady(obj)).To(BeTrue(), "Ready: %s", conditions.GetMessage(obj, meta.ReadyCondition))
	g.Expect(obj.Status.Run).To(BeNil())
	g.Expect(obj.Status.LastAppliedPlan).NotTo(BeEmpty())
	g.Expect(string(secretData(g, tf.Namespace, tf.Name+"-outputs")["effects"])).To(Equal(effects))
	g.Expect(stateLock(g, tf)).To(BeNil(), "no lock is left")
}
