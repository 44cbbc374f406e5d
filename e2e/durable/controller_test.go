package durable

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/testenv"
)

// logOnFailure logs tf as it ends up when the test fails.
func logOnFailure(t *testing.T, tf *infrav1.Terraform) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Terraform %s/%s at the end: %s", tf.Namespace, tf.Name, testenv.Describe(get(NewWithT(t), tf)))
		}
	})
}

// localController publishes module as main.tf in a new namespace and
// starts a controller with local runners; it returns the namespace, the
// controller's work directory and a path for the module's effects.
func localController(t *testing.T, module string) (c *testenv.Controller, ns, work, effects string) {
	t.Helper()
	ns = suite.Namespace(t)
	suite.Publish(t, ns, map[string]string{"main.tf": module})
	work = t.TempDir()
	c = startController(t, local, work)
	return c, ns, work, filepath.Join(t.TempDir(), "effects")
}

// localApplyUnderWay starts a controller with local runners and an
// auto-approved object on the slow module whose create sleeps sleep
// seconds, and returns once the create has begun, with the controller's
// work directory.
func localApplyUnderWay(t *testing.T, name string, sleep int) (c *testenv.Controller, tf *infrav1.Terraform, effects, work string) {
	t.Helper()
	c, ns, work, effects := localController(t, slowModule)
	tf = newSlowTerraform(t, ns, name, effects, sleep)
	logOnFailure(t, tf)
	NewWithT(t).Eventually(func() int { return began(effects) }, 2*time.Minute, 100*time.Millisecond).Should(Equal(1), "the create has begun")
	return c, tf, effects, work
}

// SIGTERM to the controller 3 s into an apply whose create takes 15 s, with
// local runners: the controller exits at once, as with runner Pods, while
// the apply goes on in its runner, which outlives it. The next controller
// attaches to the runner, collects the run and writes the outputs: the
// create ran once and to its end, the object is Ready, no lock is left.
func TestControllerSIGTERMLeavesLocalApplyRunning(t *testing.T) {
	g := NewWithT(t)
	c, tf, effects, _ := localApplyUnderWay(t, "sigterm", 15)
	time.Sleep(3 * time.Second)
	g.Expect(get(g, tf).Status.Run).NotTo(BeNil(), "the apply is in flight")
	g.Expect(c.Signal(syscall.SIGTERM)).To(Succeed())
	g.Expect(c.Wait(30*time.Second)).To(Succeed(), "the controller exits at once and cleanly")
	_, finished := creates(effects)
	g.Expect(finished).To(Equal(0), "the create is still running in the runner")

	g.Expect(c.Restart()).To(Succeed())
	g.Eventually(func(g Gomega) { settled(g, tf, effects) }, 3*time.Minute, 250*time.Millisecond).Should(Succeed())
	n, finished := creates(effects)
	g.Expect(n).To(Equal(1), "the create ran once: not interrupted, not repeated")
	g.Expect(finished).To(Equal(1))
	g.Expect(events(g, tf, infrav1.RunLostReason)).To(BeEmpty(), "no run was lost")
	g.Expect(c.Stop()).To(Succeed(), "SIGTERM: the idle controller exits cleanly")
}

// SIGKILL to the controller mid-apply (an OOM kill, a lost node), with
// local runners: the runner outlives it, in a session of its own, and
// terraform goes on. The next controller process finds the runner by the
// record in its work directory, dials it with the CA kept there, replays
// the run's log and collects the result: the create ran once, the outputs
// Secret is written, no lock is left and no run was reported lost.
func TestControllerSIGKILLWithLocalRunnersCollectsTheRun(t *testing.T) {
	g := NewWithT(t)
	c, tf, effects, _ := localApplyUnderWay(t, "killed", 10)
	g.Expect(get(g, tf).Status.Run).NotTo(BeNil(), "the run is recorded in status")
	run := get(g, tf).Status.Run.ID
	g.Expect(c.Kill()).To(Succeed())

	g.Expect(c.Restart()).To(Succeed())
	g.Eventually(func(g Gomega) { settled(g, tf, effects) }, 3*time.Minute, 250*time.Millisecond).Should(Succeed())
	g.Expect(events(g, tf, infrav1.RunLostReason)).To(BeEmpty(), "the run was collected, not lost")
	n, finished := creates(effects)
	g.Expect(n).To(Equal(1), "the create ran once")
	g.Expect(finished).To(Equal(1), "and to its end")
	obj := get(g, tf)
	g.Expect(obj.Status.LastAppliedPlan).NotTo(BeEmpty())
	g.Expect(obj.Status.Run).To(BeNil())
	g.Expect(obj.Status.LastAppliedRevision).NotTo(BeEmpty(), "run %s was collected by the new process", run)
}
