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

// SIGTERM to the controller 3 s into an apply whose create takes 15 s, with
// local runners: the controller starts nothing new, lets the apply finish,
// collects it and only then exits. The create ran once and to its end
// before the controller exited, the object is Ready with its outputs, no
// lock is left, and the next controller does not run it again.
func TestControllerSIGTERMDrainsLocalApply(t *testing.T) {
	g := NewWithT(t)
	ns := suite.Namespace(t)
	suite.Publish(t, ns, map[string]string{"main.tf": slowModule})
	work := t.TempDir()
	c := startController(t, local, work)
	effects := filepath.Join(t.TempDir(), "effects")
	tf := newSlowTerraform(t, ns, "drained", effects, 15)
	logOnFailure(t, tf)

	g.Eventually(func() int { return began(effects) }, 2*time.Minute, 100*time.Millisecond).Should(Equal(1), "the create has begun")
	time.Sleep(3 * time.Second)
	g.Expect(get(g, tf).Status.Run).NotTo(BeNil(), "the apply is in flight")
	g.Expect(c.Signal(syscall.SIGTERM)).To(Succeed())
	g.Consistently(c.Exited, 5*time.Second, 100*time.Millisecond).Should(BeFalse(), "the controller waits for the apply")
	g.Expect(c.Wait(3*time.Minute)).To(Succeed(), "a drained controller exits cleanly")
	n, finished := creates(effects)
	g.Expect(finished).To(Equal(1), "the create ran to its end before the controller exited")
	g.Expect(n).To(Equal(1), "the create ran once: not interrupted, not repeated")

	// What the drain collected, before any controller runs again.
	settled(g, tf, effects)
	applied := get(g, tf).Status.LastAppliedPlan

	g.Expect(c.Restart()).To(Succeed())
	g.Consistently(func(g Gomega) {
		settled(g, tf, effects)
		g.Expect(get(g, tf).Status.LastAppliedPlan).To(Equal(applied))
	}, 10*time.Second, time.Second).Should(Succeed())
	g.Expect(began(effects)).To(Equal(1), "the next controller does not apply again")
	g.Expect(c.Stop()).To(Succeed(), "SIGTERM: the idle controller exits cleanly within a minute")
}

// SIGKILL to the controller mid-apply, with local runners: the runners die
// with it (their parent-death signal interrupts terraform, which saves its
// state and releases its lock). The next controller finds the run in
// status, proves its runner gone, reports it lost and plans again from the
// state as it is: the object converges and no lock is left.
func TestControllerSIGKILLWithLocalRunnersRecovers(t *testing.T) {
	g := NewWithT(t)
	ns := suite.Namespace(t)
	suite.Publish(t, ns, map[string]string{"main.tf": slowModule})
	work := t.TempDir()
	c := startController(t, local, work)
	effects := filepath.Join(t.TempDir(), "effects")
	tf := newSlowTerraform(t, ns, "killed", effects, 10)
	logOnFailure(t, tf)

	g.Eventually(func() int { return began(effects) }, 2*time.Minute, 100*time.Millisecond).Should(Equal(1))
	g.Expect(get(g, tf).Status.Run).NotTo(BeNil(), "the run is recorded in status")
	g.Expect(c.Kill()).To(Succeed())

	g.Expect(c.Restart()).To(Succeed())
	g.Eventually(func(g Gomega) { settled(g, tf, effects) }, 3*time.Minute, 250*time.Millisecond).Should(Succeed())
	g.Expect(events(g, tf, infrav1.RunLostReason)).NotTo(BeEmpty(), "the lost run is reported")
	n, finished := creates(effects)
	g.Expect(n).To(Equal(2), "the interrupted create, then one more from the new plan")
	g.Expect(finished).To(Equal(1))
}
