package durable

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/testenv"
)

// slowModule: each create of terraform_data.this appends "created" to
// var.effects, sleeps var.sleep seconds and appends "finished"; the lines
// count the creates, and how many of them ran to the end. Changing var.rev
// replaces the resource (a new create).
const slowModule = `
variable "effects" { type = string }
variable "sleep" { type = number }
variable "rev" {
  type    = string
  default = "1"
}
resource "terraform_data" "this" {
  input            = var.effects
  triggers_replace = [var.rev]
  provisioner "local-exec" {
    command = "echo created >> ${var.effects} && sleep ${var.sleep} && echo finished >> ${var.effects}"
  }
}
output "effects" { value = terraform_data.this.output }
`

// Where runners run: local child processes of the controller, or Pods.
const (
	local = "local"
	pods  = "pod"
)

// controllerNS is the controller's namespace (--namespace), which holds the
// runner CA for runner Pods.
const controllerNS = "landform-system"

// controller is the real landform-controller as a child process.
type controller struct {
	cmd  *exec.Cmd
	logs *testenv.SyncBuffer
	done chan struct{}
	err  error
}

// startController runs landform-controller against the test API server with
// runners placed as placement says (local or pods), its work directory in
// workDir (keep it across restarts, as a Deployment keeps its volume), and
// args after the defaults.
func startController(t *testing.T, placement, workDir string, args ...string) *controller {
	t.Helper()
	c := &controller{logs: &testenv.SyncBuffer{}, done: make(chan struct{})}
	flags := []string{
		"--runner=" + placement, "--engine", bins.tofu, "--work-dir", workDir,
		"--metrics-addr=0", "--health-addr=0", "--zap-log-level=debug",
		"--concurrent-runs=4", "--drain-timeout=2m",
	}
	switch placement {
	case local:
		flags = append(flags, "--runner-binary", bins.runner)
	case pods:
		flags = append(flags, "--namespace="+controllerNS, "--runner-image=ghcr.io/landform-dev/landform-runner:test", "--runner-start-timeout=1m")
	}
	c.cmd = exec.Command(bins.controller, append(flags, args...)...)
	c.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "CHECKPOINT_DISABLE=1")
	c.cmd.SysProcAttr = testenv.DieWithParent()
	var out io.Writer = c.logs
	if verbose {
		out = io.MultiWriter(c.logs, prefixed(os.Stderr, "controller: "))
	}
	c.cmd.Stdout, c.cmd.Stderr = out, out
	NewWithT(t).Expect(c.cmd.Start()).To(Succeed())
	go func() { c.err = c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.done
		if t.Failed() && !verbose {
			t.Logf("controller (pid %d) output:\n%s", c.cmd.Process.Pid, c.logs.String())
		}
	})
	return c
}

// exited says whether the controller has exited.
func (c *controller) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
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

// prefixed writes to w what it is given, each line after prefix (the
// controllers and runners write whole lines).
func prefixed(w io.Writer, prefix string) io.Writer { return &prefixWriter{w: w, prefix: prefix} }

type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	var out strings.Builder
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if l != "" {
			out.WriteString(p.prefix + l)
		}
	}
	_, err := io.WriteString(p.w, out.String())
	return len(b), err
}

// publish serves files as a tarball artifact and points a GitRepository
// "repo" in ns at it, as source-controller would.
func publish(t *testing.T, ns string, files map[string]string) {
	t.Helper()
	_, err := artifacts.Publish(context.Background(), env.Client, ns, files)
	NewWithT(t).Expect(err).To(Succeed())
}

func ptrTo[T any](v T) *T { return &v }

// retryInterval is every object's spec.retryInterval.
const retryInterval = 2 * time.Second

// newSlowTerraform creates an auto-approved object on the slow module
// whose create sleeps sleep seconds, with its outputs in <name>-outputs.
func newSlowTerraform(t *testing.T, ns, name, effects string, sleep int) *infrav1.Terraform {
	t.Helper()
	tf := &infrav1.Terraform{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: infrav1.TerraformSpec{
			SourceRef:     infrav1.SourceReference{Kind: sourcev1.GitRepositoryKind, Name: "repo"},
			Path:          "./",
			Interval:      metav1.Duration{Duration: time.Hour},
			RetryInterval: &metav1.Duration{Duration: retryInterval},
			ApprovePlan:   infrav1.ApprovePlanAuto,
			Vars: []infrav1.Variable{
				{Name: "effects", Value: testenv.JSONValue(effects)},
				{Name: "sleep", Value: testenv.JSONValue(sleep)},
			},
			WriteOutputsToSecret: &infrav1.WriteOutputsToSecretSpec{Name: name + "-outputs"},
		},
	}
	NewWithT(t).Expect(env.Client.Create(context.Background(), tf)).To(Succeed())
	return tf
}

func get(g Gomega, tf *infrav1.Terraform) *infrav1.Terraform {
	out := &infrav1.Terraform{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(tf), out)).To(Succeed())
	return out
}

// creates counts the creates that began (and finished) in effects.
func creates(path string) (began, finished int) {
	b, _ := os.ReadFile(path)
	for _, l := range strings.Split(string(b), "\n") {
		switch l {
		case "created":
			began++
		case "finished":
			finished++
		}
	}
	return began, finished
}

func began(path string) int {
	n, _ := creates(path)
	return n
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

// state is what a user reads of the state Secret: serial and lineage.
type state struct {
	Serial  int64  `json:"serial"`
	Lineage string `json:"lineage"`
}

// readState reads tf's state from its Secret tfstate-<workspace>-<name>
// (gzipped JSON in data.tfstate, as the kubernetes backend writes it).
func readState(g Gomega, tf *infrav1.Terraform) state {
	data := secretData(g, tf.Namespace, tf.GetStateSecretName())["tfstate"]
	zr, err := gzip.NewReader(bytes.NewReader(data))
	g.Expect(err).NotTo(HaveOccurred())
	raw, err := io.ReadAll(zr)
	g.Expect(err).NotTo(HaveOccurred())
	var s state
	g.Expect(json.Unmarshal(raw, &s)).To(Succeed())
	return s
}

// settled checks what a user checks once the object is done with the
// current spec: Ready (reconciled to completion, this generation), no run
// in flight, its outputs in the Secret, no lock left on the state.
func settled(g Gomega, tf *infrav1.Terraform, effects string) {
	obj := get(g, tf)
	g.Expect(conditions.IsReady(obj)).To(BeTrue(), "Ready: %s", conditions.GetMessage(obj, meta.ReadyCondition))
	g.Expect(conditions.GetReason(obj, meta.ReadyCondition)).To(Equal(infrav1.ReconciliationSucceededReason))
	g.Expect(obj.Status.ObservedGeneration).To(Equal(obj.Generation))
	g.Expect(obj.Status.Run).To(BeNil(), "no run in flight")
	g.Expect(obj.Status.LastAppliedPlan).NotTo(BeEmpty())
	g.Expect(string(secretData(g, tf.Namespace, tf.Name+"-outputs")["effects"])).To(Equal(effects))
	noLock(g, tf)
}

// noLock: the state's lock Lease (lock-tfstate-<workspace>-<name>) holds no
// lock, as `kubectl get lease` shows it.
func noLock(g Gomega, tf *infrav1.Terraform) {
	var lease coordinationv1.Lease
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: tf.Namespace, Name: "lock-" + tf.GetStateSecretName()}, &lease)
	if apierrors.IsNotFound(err) {
		return
	}
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lease.Spec.HolderIdentity).To(Or(BeNil(), HaveValue(BeEmpty())), "no lock is left on the state")
	g.Expect(stateLock(g, tf)).To(BeNil())
}

// events returns the messages of tf's events with reason.
func events(g Gomega, tf *infrav1.Terraform, reason string) []string {
	var list corev1.EventList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(tf.Namespace))).To(Succeed())
	var msgs []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == infrav1.TerraformKind && e.InvolvedObject.Name == tf.Name && e.Reason == reason {
			msgs = append(msgs, e.Message)
		}
	}
	return msgs
}

// runnerPods lists the runner Pods in ns, being deleted or not.
func runnerPods(g Gomega, ns string) []corev1.Pod {
	var list corev1.PodList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": "landform-runner"})).To(Succeed())
	return list.Items
}

// liveRunnerPod is the one runner Pod in ns that is not being deleted.
func liveRunnerPod(g Gomega, ns string) corev1.Pod {
	var live []corev1.Pod
	for _, p := range runnerPods(g, ns) {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			live = append(live, p)
		}
	}
	g.Expect(live).To(HaveLen(1), "one runner Pod runs")
	return live[0]
}

func describe(tf *infrav1.Terraform) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s generation %d, observed %d", tf.Namespace, tf.Name, tf.Generation, tf.Status.ObservedGeneration)
	for _, c := range tf.Status.Conditions {
		fmt.Fprintf(&b, "\n  %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}
