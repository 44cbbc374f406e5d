package durable

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

func hasEvent(g Gomega, ns, name, reason string) bool {
	var events corev1.EventList
	g.Expect(env.Client.List(context.Background(), &events, client.InNamespace(ns))).To(Succeed())
	for _, e := range events.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			return true
		}
	}
	return false
}

// SIGTERM to the controller 3 s into an apply whose create takes 15 s, with
// local runners: the controller starts nothing new, lets the apply finish,
// collects it and only then exits. The create ran once, the object is
// Ready with its outputs, no lock is left, and the next controller does
// not run it again.
func TestControllerSIGTERMDrainsLocalApply(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	publish(t, ns, map[string]string{"main.tf": slowModule})
	work := t.TempDir()
	c := startController(t, work, "--drain-timeout=2m")
	effects := filepath.Join(t.TempDir(), "effects")
	tf := newSlowTerraform(t, ns, "drained", effects, 15)

	g.Eventually(func() int { return creates(effects) }, 2*time.Minute, 100*time.Millisecond).Should(Equal(1), "the create has begun")
	time.Sleep(3 * time.Second)
	stopped := time.Now()
	c.signal(t, syscall.SIGTERM)
	g.Expect(c.waitExit(t, 3*time.Minute)).To(Succeed(), "a drained controller exits cleanly")
	g.Expect(time.Since(stopped)).To(BeNumerically(">", 5*time.Second), "it waited for the apply")

	// What the drain collected, before any controller runs again.
	settled(g, tf, effects)
	g.Expect(creates(effects)).To(Equal(1), "the create ran once: not interrupted, not repeated")
	applied := get(g, tf).Status.LastAppliedPlan

	c = startController(t, work)
	g.Consistently(func(g Gomega) {
		settled(g, tf, effects)
		g.Expect(get(g, tf).Status.LastAppliedPlan).To(Equal(applied))
	}, 10*time.Second, time.Second).Should(Succeed())
	g.Expect(creates(effects)).To(Equal(1), "the next controller does not apply again")
	c.signal(t, syscall.SIGTERM)
	g.Expect(c.waitExit(t, time.Minute)).To(Succeed())
}

// SIGKILL to the controller mid-apply, with local runners: the runners die
// with it (their parent-death signal interrupts terraform, which releases
// its lock). The next controller finds the run in status, proves its
// runner gone, reports it lost and plans again from the state as it is:
// the object converges and no lock is left.
func TestControllerSIGKILLWithLocalRunnersRecovers(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	publish(t, ns, map[string]string{"main.tf": slowModule})
	work := t.TempDir()
	c := startController(t, work)
	effects := filepath.Join(t.TempDir(), "effects")
	tf := newSlowTerraform(t, ns, "killed", effects, 10)

	g.Eventually(func() int { return creates(effects) }, 2*time.Minute, 100*time.Millisecond).Should(Equal(1))
	g.Expect(get(g, tf).Status.Run).NotTo(BeNil(), "the run is recorded in status")
	c.signal(t, syscall.SIGKILL)
	_ = c.waitExit(t, time.Minute)

	c = startController(t, work)
	g.Eventually(func(g Gomega) { settled(g, tf, effects) }, 3*time.Minute, 250*time.Millisecond).Should(Succeed())
	g.Expect(hasEvent(g, tf.Namespace, tf.Name, infrav1.RunLostReason)).To(BeTrue(), "the lost run is reported")
}
