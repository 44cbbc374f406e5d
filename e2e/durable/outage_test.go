package durable

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/testenv"
	"github.com/landform-dev/landform/internal/unsavedstate"
	"github.com/landform-dev/landform/runner"
)

// ownControlPlane gives the calling test a control plane of its own, whose
// kube-apiserver it may stop and start again (testenv.StartRestartable),
// in place of the suite's until the test ends: suite.Env and
// suite.Kubeconfig, which the harness uses, name it meanwhile. The tests of
// this package run one at a time, so no other test sees the swap.
func ownControlPlane(t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	suite.Require(t)
	own, err := testenv.StartRestartable()
	g.Expect(err).NotTo(HaveOccurred(), "starting a restartable API server")
	ownKubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(placement.WriteKubeconfig(own.Config, ownKubeconfig)).To(Succeed())
	prevEnv, prevKubeconfig := suite.Env, suite.Kubeconfig
	suite.Env, suite.Kubeconfig = own, ownKubeconfig
	t.Cleanup(func() {
		suite.Env, suite.Kubeconfig = prevEnv, prevKubeconfig
		_ = own.Stop()
	})
}

// startAPIServerAfterOutage starts the API server stopped at stopped
// again, once it has been away for 30 s.
func startAPIServerAfterOutage(t *testing.T, stopped time.Time) {
	t.Helper()
	time.Sleep(time.Until(stopped.Add(30 * time.Second)))
	NewWithT(t).Expect(suite.Env.StartAPIServer()).To(Succeed())
}

// keptStates are the unsaved states local runners keep in their run
// directories under the controller's work directory.
func keptStates(work string) []string {
	m, _ := filepath.Glob(filepath.Join(work, "runners", "landform-runner-*", "work", runner.KeptStateFile))
	return m
}

// stopAPIServerMidCreate waits for tf's create to begin, stops the API
// server, and returns once the create ended with the API server away and
// the runner keeps the state terraform could not write, in its run
// directory: the state holds the resource.
func stopAPIServerMidCreate(t *testing.T, work, effects string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func() int { return began(effects) }, 2*time.Minute, 100*time.Millisecond).Should(Equal(1), "the create has begun")
	g.Expect(suite.Env.StopAPIServer()).To(Succeed())
	g.Eventually(func() int { _, f := creates(effects); return f }, time.Minute, 100*time.Millisecond).Should(Equal(1), "the create ends while the API server is away")
	g.Eventually(func() []string { return keptStates(work) }, time.Minute, 100*time.Millisecond).Should(HaveLen(1),
		"terraform could not write the state, and the runner keeps it in its run directory")
	kept, err := os.ReadFile(keptStates(work)[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(kept)).To(ContainSubstring(`"terraform_data"`), "the kept state holds the resource")
}

// stateAfterOutage checks what a user checks once the object settled
// after the outage: the create ran once and to its end, the state holds
// the resource, nothing is kept unsaved any more, and Landform said it
// wrote the state.
func stateAfterOutage(g Gomega, tf *infrav1.Terraform, work, effects string) {
	n, finished := creates(effects)
	g.Expect(n).To(Equal(1), "the create ran once")
	g.Expect(finished).To(Equal(1))
	st := readState(g, tf)
	g.Expect(st.Resources).To(ContainElement(HaveField("Name", "this")), "the state holds the resource")
	err := suite.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: tf.Namespace, Name: unsavedstate.SecretName(tf)}, &corev1.Secret{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no unsaved state is kept once it is written: %v", err)
	g.Expect(keptStates(work)).To(BeEmpty())
	// Events are recorded asynchronously.
	g.Eventually(func(g Gomega) []string { return events(g, tf, infrav1.StatePersistedReason) }, 30*time.Second, 250*time.Millisecond).
		ShouldNot(BeEmpty(), "an event says Landform wrote the state")
}

// The kube-apiserver is stopped while an apply creates its resource and
// kept away for 30 s, far longer than terraform tries to write the state
// at the end of the apply (it fails at once and writes errored.tfstate),
// then started again on the same address, certificates and etcd. The
// runner keeps the state, retries writing it and writes it once the API
// server answers: the object is Ready, the create ran once, the state
// holds the resource, no lock is left, and nothing creates it again.
func TestAPIServerOutageMidApplyKeepsTheState(t *testing.T) {
	ownControlPlane(t)
	g := NewWithT(t)
	_, tf, effects, work := localApplyUnderWay(t, "outage", 15)

	stopped := time.Now()
	stopAPIServerMidCreate(t, work, effects)
	startAPIServerAfterOutage(t, stopped)

	g.Eventually(func(g Gomega) { settled(g, tf, effects) }, 3*time.Minute, 250*time.Millisecond).Should(Succeed())
	stateAfterOutage(g, tf, work, effects)
	g.Consistently(func(g Gomega) {
		settled(g, tf, effects)
		g.Expect(began(effects)).To(Equal(1))
	}, 10*time.Second, time.Second).Should(Succeed(), "nothing creates the resource again")
}

// As above, and the runner is killed while it holds the unsaved state and
// the API server is away: the controller got the state from the runner
// and keeps it in Secret tfunsaved-<name>-0 once the API server
// answers; the run is lost, and before the next run plans, the controller
// writes the kept state to the backend. The create ran once.
func TestRunnerKilledWithAnUnsavedStateNextRunWritesIt(t *testing.T) {
	ownControlPlane(t)
	g := NewWithT(t)
	_, tf, effects, work := localApplyUnderWay(t, "orphaned-state", 15)

	stopAPIServerMidCreate(t, work, effects)
	pids := runnerProcesses(work)
	g.Expect(pids).To(HaveLen(1), "one runner runs")
	g.Expect(syscall.Kill(pids[0], syscall.SIGKILL)).To(Succeed())
	g.Eventually(func() []int { return runnerProcesses(work) }, 30*time.Second, 100*time.Millisecond).Should(BeEmpty())
	g.Expect(suite.Env.StartAPIServer()).To(Succeed())

	g.Eventually(func(g Gomega) { ready(g, tf, effects) }, 3*time.Minute, 250*time.Millisecond).Should(Succeed())
	g.Eventually(func(g Gomega) []string { return events(g, tf, infrav1.RunLostReason) }, 30*time.Second, 250*time.Millisecond).
		ShouldNot(BeEmpty(), "the killed runner's run is lost")
	g.Expect(get(g, tf).Status.Plan).To(Or(BeNil(), HaveField("Add", BeZero())), "the plan after it starts from the written state: nothing to create")
	stateAfterOutage(g, tf, work, effects)
}

// runnerProcesses are the pids of the local runners with their run
// directories under the controller's work directory work.
func runnerProcesses(work string) []int {
	dir := []byte(filepath.Join(work, "runners") + string(filepath.Separator))
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, dir) {
			continue
		}
		if args := strings.Split(string(cmdline), "\x00"); filepath.Base(args[0]) == filepath.Base(suite.Runner) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// slowDestroyModule: the create of terraform_data.this appends "created"
// to var.effects; its destroy appends "destroying", sleeps var.sleep
// seconds and appends "destroyed". A destroy-time provisioner may refer to
// self only, so the resource carries both in its input.
const slowDestroyModule = `
variable "effects" { type = string }
variable "sleep" { type = number }
resource "terraform_data" "this" {
  input = { effects = var.effects, sleep = var.sleep }
  provisioner "local-exec" {
    command = "echo created >> ${var.effects}"
  }
  provisioner "local-exec" {
    when    = destroy
    command = "echo destroying >> ${self.input.effects} && sleep ${self.input.sleep} && echo destroyed >> ${self.input.effects}"
  }
}
output "effects" { value = var.effects }
`

// lines counts the lines of effects equal to line.
func lines(effects, line string) int {
	b, _ := os.ReadFile(effects)
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if l == line {
			n++
		}
	}
	return n
}

// The kube-apiserver is stopped while the destroy of a deleted object
// (deletionPolicy Delete) runs its resource's destroy, kept away for 30 s,
// far longer than terraform tries to write the emptied state at the end
// of the destroy, then started again on the same address, certificates and
// etcd. The runner keeps the state, writes it once the API server answers,
// and the controller collects the destroy: the destroy ran once and to
// its end, the object is gone, so are its state Secret and lock Lease, no
// unsaved state is kept, and nothing created the resource again.
func TestAPIServerOutageMidDestroyKeepsTheState(t *testing.T) {
	ownControlPlane(t)
	g := NewWithT(t)
	_, ns, work, effects := localController(t, slowDestroyModule)
	tf := newSlowTerraform(t, ns, "outage-destroy", effects, 15)
	logOnFailure(t, tf)
	g.Eventually(func(g Gomega) { settled(g, tf, effects) }, 3*time.Minute, 250*time.Millisecond).Should(Succeed())
	g.Expect(lines(effects, "created")).To(Equal(1))

	g.Expect(suite.Env.Client.Delete(context.Background(), tf)).To(Succeed())
	g.Eventually(func() int { return lines(effects, "destroying") }, 2*time.Minute, 100*time.Millisecond).Should(Equal(1), "the destroy has begun")
	stopped := time.Now()
	g.Expect(suite.Env.StopAPIServer()).To(Succeed())
	g.Eventually(func() int { return lines(effects, "destroyed") }, time.Minute, 100*time.Millisecond).Should(Equal(1), "the destroy ends while the API server is away")
	g.Eventually(func() []string { return keptStates(work) }, time.Minute, 100*time.Millisecond).Should(HaveLen(1),
		"terraform could not write the state, and the runner keeps it in its run directory")
	startAPIServerAfterOutage(t, stopped)

	g.Eventually(func() error {
		return suite.Env.Client.Get(context.Background(), client.ObjectKeyFromObject(tf), &infrav1.Terraform{})
	}, 3*time.Minute, 250*time.Millisecond).Should(Satisfy(apierrors.IsNotFound), "the finalizer is released and the object is gone")
	g.Expect(lines(effects, "destroying")).To(Equal(1), "the destroy ran once")
	g.Expect(lines(effects, "destroyed")).To(Equal(1), "and to its end")
	g.Expect(lines(effects, "created")).To(Equal(1), "nothing created the resource again")
	for _, s := range []string{names.StateSecret(tf), unsavedstate.SecretName(tf)} {
		err := suite.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: s}, &corev1.Secret{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Secret %s is gone: %v", s, err)
	}
	err := suite.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: names.StateLease(tf)}, &coordinationv1.Lease{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the state's lock Lease is gone: %v", err)
	g.Expect(keptStates(work)).To(BeEmpty(), "nothing is kept unsaved")
	g.Consistently(func() int { return lines(effects, "created") }, 10*time.Second, time.Second).Should(Equal(1), "nothing creates the resource again")
}

// The kube-apiserver is stopped as soon as the object records its plan
// run (manual approval: only a plan runs), kept away for 30 s and started
// again on the same address, certificates and etcd. The engine cannot
// reach its backend (init fails to list the workspaces), so the plan
// fails, and the controller can record neither that nor anything else: it
// retries with its backoff. Once the API server answers, it plans again:
// the object waits with one pending plan that creates the resource,
// nothing was created, no lock is left, no run is in flight, and no
// further plan replaces the pending one.
func TestAPIServerOutageAtPlanStartLeavesOnePendingPlan(t *testing.T) {
	ownControlPlane(t)
	g := NewWithT(t)
	_, ns, _, effects := localController(t, slowModule)
	tf := slowTerraform(ns, "outage-plan", effects, 1)
	tf.Spec.ApprovePlan = ""
	g.Expect(suite.Env.Client.Create(context.Background(), tf)).To(Succeed())
	logOnFailure(t, tf)

	g.Eventually(func(g Gomega) {
		run := get(g, tf).Status.Run
		g.Expect(run).NotTo(BeNil())
		g.Expect(run.Action).To(Equal("plan"))
	}, 2*time.Minute, 20*time.Millisecond).Should(Succeed(), "the plan run is recorded")
	stopped := time.Now()
	g.Expect(suite.Env.StopAPIServer()).To(Succeed())
	startAPIServerAfterOutage(t, stopped)

	pending := func(g Gomega) string {
		obj := get(g, tf)
		g.Expect(conditions.GetReason(obj, meta.ReadyCondition)).To(Equal(infrav1.PlanPendingReason), "Ready: %s", conditions.GetMessage(obj, meta.ReadyCondition))
		g.Expect(obj.Status.Run).To(BeNil(), "no run in flight")
		g.Expect(obj.Status.Plan).NotTo(BeNil())
		g.Expect(obj.Status.Plan.Pending).NotTo(BeEmpty())
		g.Expect(obj.Status.Plan.ID).To(Equal(obj.Status.Plan.Pending))
		g.Expect(obj.Status.Plan.Add).To(BeEquivalentTo(1), "the plan creates the resource")
		noLock(g, tf)
		g.Expect(began(effects)).To(BeZero(), "nothing was created")
		return obj.Status.Plan.Pending
	}
	// The controller's backoff after 30 s of errors is up to 80 s.
	g.Eventually(func(g Gomega) { pending(g) }, 4*time.Minute, 250*time.Millisecond).Should(Succeed())
	id := pending(g)
	g.Consistently(func(g Gomega) string { return pending(g) }, 10*time.Second, time.Second).Should(Equal(id), "no plan replaces the pending one")
}
