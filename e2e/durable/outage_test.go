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

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
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
	ns := suite.Namespace(t)
	suite.Publish(t, ns, map[string]string{"main.tf": slowModule})
	work := t.TempDir()
	startController(t, local, work)
	effects := filepath.Join(t.TempDir(), "effects")
	tf := newSlowTerraform(t, ns, "outage", effects, 15)
	logOnFailure(t, tf)

	stopped := time.Now()
	stopAPIServerMidCreate(t, work, effects)
	time.Sleep(time.Until(stopped.Add(30 * time.Second)))
	g.Expect(suite.Env.StartAPIServer()).To(Succeed())

	g.Eventually(func(g Gomega) { settled(g, tf, effects) }, 3*time.Minute, 250*time.Millisecond).Should(Succeed())
	stateAfterOutage(g, tf, work, effects)
	g.Consistently(func(g Gomega) {
		settled(g, tf, effects)
		g.Expect(began(effects)).To(Equal(1))
	}, 10*time.Second, time.Second).Should(Succeed(), "nothing creates the resource again")
}

// As above, and the runner is killed while it holds the unsaved state and
// the API server is away: the controller got the state from the runner
// and keeps it in Secret tfstate-unsaved-<name>-0 once the API server
// answers; the run is lost, and before the next run plans, the controller
// writes the kept state to the backend. The create ran once.
func TestRunnerKilledWithAnUnsavedStateNextRunWritesIt(t *testing.T) {
	ownControlPlane(t)
	g := NewWithT(t)
	ns := suite.Namespace(t)
	suite.Publish(t, ns, map[string]string{"main.tf": slowModule})
	work := t.TempDir()
	startController(t, local, work)
	effects := filepath.Join(t.TempDir(), "effects")
	tf := newSlowTerraform(t, ns, "orphaned-state", effects, 15)
	logOnFailure(t, tf)

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
