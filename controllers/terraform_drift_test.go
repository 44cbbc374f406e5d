package controllers

import (
	"math/rand"
	"os"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/jitter"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// An out-of-band change is detected at the next interval and, with auto
// approval, repaired.
func TestDriftIsDetectedAndRepaired(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	tf, path := newFileTerraform(t, ns, "drift", "desired", func(tf *infrav1.Terraform) {
		tf.Spec.Interval = metav1.Duration{Duration: 3 * time.Second}
	})
	obj := waitReady(t, tf)
	applied := obj.Status.LastAppliedPlan
	g.Expect(readFile(path)).To(Equal("desired"))

	g.Expect(os.WriteFile(path, []byte("changed by hand"), 0o644)).To(Succeed())

	obj = waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(obj.Status.LastAppliedPlan).NotTo(Equal(applied), "a drift plan was applied")
		g.Expect(conditions.IsReady(obj)).To(BeTrue())
		g.Expect(conditions.GetReason(obj, infrav1.DriftedCondition)).To(Equal(infrav1.AppliedReason))
	})
	g.Expect(readFile(path)).To(Equal("desired"), "repaired")
	g.Expect(obj.Status.Plan.IsDrift).To(BeTrue())
	g.Expect(obj.Status.Plan.Change).To(Equal(int32(1)))
	g.Expect(conditions.GetReason(obj, infrav1.DriftedCondition)).To(Equal(infrav1.AppliedReason), "drift repaired")
}

// Without auto approval, drift is reported and waits for approval.
func TestDriftIsReportedForManualApproval(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	tf, path := newFileTerraform(t, ns, "drift-manual", "desired", func(tf *infrav1.Terraform) {
		tf.Spec.Interval = metav1.Duration{Duration: 3 * time.Second}
	})
	waitReady(t, tf)
	updateSpec(t, tf, manualApproval)
	waitReady(t, tf)
	g.Expect(os.Remove(path)).To(Succeed())

	obj := waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(conditions.IsTrue(obj, infrav1.DriftedCondition)).To(BeTrue())
		g.Expect(obj.PendingPlan()).NotTo(BeEmpty())
	})
	g.Expect(conditions.GetReason(obj, infrav1.DriftedCondition)).To(Equal(infrav1.DriftDetectedReason))
	g.Expect(conditions.GetMessage(obj, infrav1.DriftedCondition)).To(ContainSubstring("landform_file.this"))
	g.Expect(obj.Status.Plan.Pending).NotTo(BeEmpty())
	g.Expect(obj.Status.Plan.IsDrift).To(BeTrue())
	g.Expect(readFile(path)).To(Equal("<missing>"), "not repaired without approval")
}

// TestDriftChecksAreJittered: objects planned at the same moment get their
// next drift checks spread around the interval, within the percentage.
func TestDriftChecksAreJittered(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	r := &TerraformReconciler{Now: func() time.Time { return now }, Jitter: jitter.Percent(0.05, rand.New(rand.NewSource(1)))}
	obj := &infrav1.Terraform{}
	obj.Spec.Interval = metav1.Duration{Duration: time.Hour}
	planned := metav1.NewTime(now)
	obj.Status.Plan = &infrav1.PlanStatus{PlannedAt: &planned}

	seen := map[time.Duration]bool{}
	for range 50 {
		d := r.nextCheck(obj).After
		if d < 57*time.Minute || d > 63*time.Minute {
			t.Fatalf("next check in %s: outside 1h ± 5%%", d)
		}
		seen[d] = true
	}
	if len(seen) < 10 {
		t.Fatalf("50 objects planned together check at only %d distinct moments", len(seen))
	}

	r.Jitter = nil
	if d := r.nextCheck(obj).After; d != time.Hour {
		t.Fatalf("without jitter the next check is in %s, want 1h", d)
	}
}
