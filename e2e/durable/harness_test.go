package durable

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
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

// startController runs landform-controller against the test API server with
// runners placed as placement says (local or pods), its work directory in
// workDir (keep it across restarts, as a Deployment keeps its volume).
func startController(t *testing.T, placement, workDir string) *testenv.Controller {
	t.Helper()
	args := []string{"--log-level=debug", "--concurrent-runs=4"}
	if placement == pods {
		args = append(args, "--namespace="+controllerNS, "--runner-image=ghcr.io/landform-dev/landform-runner:test", "--runner-start-timeout=1m")
	}
	return suite.StartController(t, testenv.ControllerOptions{Runner: placement, WorkDir: workDir, Args: args})
}

// retryInterval is every object's spec.retryInterval.
const retryInterval = 2 * time.Second

// newSlowTerraform creates an auto-approved object on the slow module
// whose create sleeps sleep seconds, with its outputs in <name>-outputs.
func newSlowTerraform(t *testing.T, ns, name, effects string, sleep int) *infrav1.Terraform {
	t.Helper()
	tf := slowTerraform(ns, name, effects, sleep)
	NewWithT(t).Expect(suite.Env.Client.Create(context.Background(), tf)).To(Succeed())
	return tf
}

// slowTerraform is the object newSlowTerraform creates, not yet created.
func slowTerraform(ns, name, effects string, sleep int) *infrav1.Terraform {
	tf := suite.Terraform(ns, name, retryInterval,
		infrav1.Variable{Name: "effects", Value: testenv.JSONValue(effects)},
		infrav1.Variable{Name: "sleep", Value: testenv.JSONValue(sleep)})
	// The tests make a new create by replacing the resource (var.rev):
	// applied without a person, as they need.
	tf.Spec.AutoApproveDestructive = true
	return tf
}

func get(g Gomega, tf *infrav1.Terraform) *infrav1.Terraform {
	out := &infrav1.Terraform{}
	g.Expect(suite.Env.Client.Get(context.Background(), client.ObjectKeyFromObject(tf), out)).To(Succeed())
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
	info, err := statelock.Read(context.Background(), kube().CoordinationV1().Leases(tf.Namespace), names.StateLease(tf))
	g.Expect(err).NotTo(HaveOccurred())
	return info
}

func secretData(g Gomega, ns, name string) map[string][]byte {
	s := &corev1.Secret{}
	g.Expect(suite.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
	return s.Data
}

// readState reads tf's state from its Secret tfstate-<workspace>-<name>
// (gzipped JSON in data.tfstate, as the kubernetes backend writes it).
func readState(g Gomega, tf *infrav1.Terraform) testenv.State {
	st, err := testenv.ReadState(secretData(g, tf.Namespace, names.StateSecret(tf)))
	g.Expect(err).NotTo(HaveOccurred())
	return st
}

// settled checks what a user checks once the object is done with the
// current spec: Ready (reconciled to completion, this generation), no run
// in flight, its outputs in the Secret, no lock left on the state.
func settled(g Gomega, tf *infrav1.Terraform, effects string) {
	ready(g, tf, effects)
	g.Expect(get(g, tf).Status.LastAppliedPlan).NotTo(BeEmpty())
}

// ready is settled for an object whose apply was lost after it applied
// everything: the plan after it has no changes, so no plan of this
// controller's is recorded as applied.
func ready(g Gomega, tf *infrav1.Terraform, effects string) {
	obj := get(g, tf)
	g.Expect(conditions.IsReady(obj)).To(BeTrue(), "Ready: %s", conditions.GetMessage(obj, meta.ReadyCondition))
	g.Expect(conditions.GetReason(obj, meta.ReadyCondition)).To(Equal(infrav1.ReconciliationSucceededReason))
	g.Expect(obj.Status.ObservedGeneration).To(Equal(obj.Generation))
	g.Expect(obj.Status.Run).To(BeNil(), "no run in flight")
	g.Expect(string(secretData(g, tf.Namespace, tf.Name+"-outputs")["effects"])).To(Equal(effects))
	noLock(g, tf)
}

// noLock: the state's lock Lease (lock-tfstate-<workspace>-<name>) holds no
// lock, as `kubectl get lease` shows it.
func noLock(g Gomega, tf *infrav1.Terraform) {
	var lease coordinationv1.Lease
	err := suite.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: tf.Namespace, Name: names.StateLease(tf)}, &lease)
	if apierrors.IsNotFound(err) {
		return
	}
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lease.Spec.HolderIdentity).To(Or(BeNil(), HaveValue(BeEmpty())), "no lock is left on the state")
	g.Expect(stateLock(g, tf)).To(BeNil())
}

// events returns the messages of tf's events with reason.
func events(g Gomega, tf *infrav1.Terraform, reason string) []string {
	msgs, err := testenv.Events(context.Background(), suite.Env.Client, tf, reason)
	g.Expect(err).NotTo(HaveOccurred())
	return msgs
}

// runnerPods lists the runner Pods in ns, being deleted or not.
func runnerPods(g Gomega, ns string) []corev1.Pod {
	var list corev1.PodList
	g.Expect(suite.Env.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": "landform-runner"})).To(Succeed())
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
