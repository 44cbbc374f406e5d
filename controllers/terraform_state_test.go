package controllers

import (
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	plannedAt := func(ago time.Duration) func(*infrav1.Terraform) {
		return func(tf *infrav1.Terraform) {
			at := metav1.NewTime(now.Add(-ago))
			tf.Status.Plan = &infrav1.PlanStatus{PlannedAt: &at}
		}
	}
	pending := func(id string) func(*infrav1.Terraform) {
		return func(tf *infrav1.Terraform) { tf.Status.Plan = &infrav1.PlanStatus{ID: id, Pending: id} }
	}
	// replacing is a pending plan that replaces a resource, with the spec
	// changes mutate makes.
	replacing := func(mutate func(*infrav1.Terraform)) func(*infrav1.Terraform) {
		return func(tf *infrav1.Terraform) {
			tf.Spec.ApprovePlan = "auto"
			tf.Status.Plan = &infrav1.PlanStatus{ID: "p", Pending: "p", Add: 1, Destroy: 1, Replace: 1, ResourcesToReplace: []string{"a.db"}}
			if mutate != nil {
				mutate(tf)
			}
		}
	}
	pendingP := observation{inputsDigest: "a", plan: &storedPlan{ID: "p", InputsDigest: "a"}}
	cases := []struct {
		name   string
		mutate func(*infrav1.Terraform)
		obs    observation
		want   decision
	}{
		{name: "no plan yet", obs: observation{inputsDigest: "a"}, want: decision{action: actionPlan}},
		{name: "inputs changed", obs: observation{inputsDigest: "b", plan: &storedPlan{ID: "p", InputsDigest: "a", Applied: true}}, want: decision{action: actionPlan}},
		{name: "status lost the pending plan", obs: observation{inputsDigest: "a", plan: &storedPlan{ID: "p", InputsDigest: "a"}}, want: decision{action: actionPlan}},
		{name: "pending, not approved", mutate: pending("p"), obs: observation{inputsDigest: "a", plan: &storedPlan{ID: "p", InputsDigest: "a"}}, want: decision{action: actionWait, after: time.Hour}},
		{name: "pending, auto", mutate: func(tf *infrav1.Terraform) { pending("p")(tf); tf.Spec.ApprovePlan = "auto" },
			obs: observation{inputsDigest: "a", plan: &storedPlan{ID: "p", InputsDigest: "a"}}, want: decision{action: actionApply}},
		{name: "pending, annotation names it", mutate: func(tf *infrav1.Terraform) {
			pending("p")(tf)
			tf.Annotations = map[string]string{infrav1.ApproveAnnotation: "p"}
		},
			obs: observation{inputsDigest: "a", plan: &storedPlan{ID: "p", InputsDigest: "a"}}, want: decision{action: actionApply}},
		{name: "pending, annotation names another plan", mutate: func(tf *infrav1.Terraform) {
			pending("p")(tf)
			tf.Annotations = map[string]string{infrav1.ApproveAnnotation: "q"}
		},
			obs: observation{inputsDigest: "a", plan: &storedPlan{ID: "p", InputsDigest: "a"}}, want: decision{action: actionWait, after: time.Hour}},
		{name: "pending, spec names it", mutate: func(tf *infrav1.Terraform) { pending("p")(tf); tf.Spec.ApprovePlan = "p" },
			obs: observation{inputsDigest: "a", plan: &storedPlan{ID: "p", InputsDigest: "a"}}, want: decision{action: actionApply}},
		{name: "planOnly never applies", mutate: func(tf *infrav1.Terraform) {
			tf.Spec.ApprovePlan = "auto"
			tf.Spec.PlanOnly = true
			plannedAt(time.Minute)(tf)
			tf.Status.Plan.Pending = "p"
		},
			obs: observation{inputsDigest: "a", plan: &storedPlan{ID: "p", InputsDigest: "a"}, outputsWritten: true}, want: decision{action: actionNone, after: 59 * time.Minute}},
		{name: "auto, destructive: waits", mutate: replacing(nil), obs: pendingP, want: decision{action: actionWait, destructive: true, after: time.Hour}},
		{name: "auto, only destroys: waits", mutate: replacing(func(tf *infrav1.Terraform) {
			tf.Status.Plan.Add, tf.Status.Plan.Replace, tf.Status.Plan.ResourcesToReplace = 0, 0, nil
			tf.Status.Plan.ResourcesToDestroy = []string{"a.db"}
		}), obs: pendingP, want: decision{action: actionWait, destructive: true, after: time.Hour}},
		{name: "auto, destructive drift repair: waits", mutate: replacing(func(tf *infrav1.Terraform) { tf.Status.Plan.IsDrift = true }),
			obs: pendingP, want: decision{action: actionWait, destructive: true, after: time.Hour}},
		{name: "auto, destructive, annotation names it", mutate: replacing(func(tf *infrav1.Terraform) {
			tf.Annotations = map[string]string{infrav1.ApproveAnnotation: "p"}
		}), obs: pendingP, want: decision{action: actionApply}},
		{name: "auto, destructive, annotation names another plan", mutate: replacing(func(tf *infrav1.Terraform) {
			tf.Annotations = map[string]string{infrav1.ApproveAnnotation: "q"}
		}), obs: pendingP, want: decision{action: actionWait, destructive: true, after: time.Hour}},
		{name: "auto, destructive, autoApproveDestructive", mutate: replacing(func(tf *infrav1.Terraform) { tf.Spec.AutoApproveDestructive = true }),
			obs: pendingP, want: decision{action: actionApply}},
		{name: "auto, spec.destroy plan is not held", mutate: replacing(func(tf *infrav1.Terraform) {
			tf.Spec.Destroy = true
			tf.Status.Plan.IsDestroy = true
		}), obs: pendingP, want: decision{action: actionApply}},
		{name: "manual, destructive: an ordinary wait", mutate: replacing(func(tf *infrav1.Terraform) { tf.Spec.ApprovePlan = "" }),
			obs: pendingP, want: decision{action: actionWait, after: time.Hour}},
		{name: "spec names the destructive plan", mutate: replacing(func(tf *infrav1.Terraform) { tf.Spec.ApprovePlan = "p" }),
			obs: pendingP, want: decision{action: actionApply}},
		{name: "planOnly, destructive: never applies", mutate: replacing(func(tf *infrav1.Terraform) {
			tf.Spec.PlanOnly = true
			at := metav1.NewTime(now.Add(-time.Minute))
			tf.Status.Plan.PlannedAt = &at
		}), obs: observation{inputsDigest: "a", plan: &storedPlan{ID: "p", InputsDigest: "a"}, outputsWritten: true}, want: decision{action: actionNone, after: 59 * time.Minute}},
		{name: "applied, outputs missing", obs: observation{inputsDigest: "a", plan: &storedPlan{ID: "p", InputsDigest: "a", Applied: true}}, want: decision{action: actionOutputs}},
		{name: "applied, drift check not due", mutate: plannedAt(10 * time.Minute),
			obs: observation{inputsDigest: "a", plan: &storedPlan{ID: "p", InputsDigest: "a", Applied: true}, outputsWritten: true}, want: decision{action: actionNone, after: 50 * time.Minute}},
		{name: "applied, drift check due", mutate: plannedAt(2 * time.Hour),
			obs: observation{inputsDigest: "a", plan: &storedPlan{ID: "p", InputsDigest: "a", Applied: true}, outputsWritten: true}, want: decision{action: actionPlan, drift: true}},
		{name: "applied, drift detection off", mutate: func(tf *infrav1.Terraform) { plannedAt(2 * time.Hour)(tf); tf.Spec.DisableDriftDetection = true },
			obs: observation{inputsDigest: "a", plan: &storedPlan{ID: "p", InputsDigest: "a", Applied: true}, outputsWritten: true}, want: decision{action: actionNone, after: time.Hour}},
		{name: "reconcile requested", mutate: func(tf *infrav1.Terraform) {
			plannedAt(time.Minute)(tf)
			tf.Annotations = map[string]string{meta.ReconcileRequestAnnotation: "now"}
		}, obs: observation{inputsDigest: "a", plan: &storedPlan{ID: "p", InputsDigest: "a", Applied: true}, outputsWritten: true}, want: decision{action: actionPlan, drift: true}},
		{name: "reconcile requested while a plan is pending", mutate: func(tf *infrav1.Terraform) {
			pending("p")(tf)
			tf.Annotations = map[string]string{meta.ReconcileRequestAnnotation: "now"}
		}, obs: observation{inputsDigest: "a", plan: &storedPlan{ID: "p", InputsDigest: "a"}}, want: decision{action: actionPlan}},
		{name: "reconcile requested with drift detection off", mutate: func(tf *infrav1.Terraform) {
			tf.Spec.DisableDriftDetection = true
			tf.Annotations = map[string]string{meta.ReconcileRequestAnnotation: "now"}
		}, obs: observation{inputsDigest: "a", plan: &storedPlan{ID: "p", InputsDigest: "a", Applied: true}, outputsWritten: true}, want: decision{action: actionPlan, drift: true}},
		{name: "reconcile request already handled", mutate: func(tf *infrav1.Terraform) {
			plannedAt(time.Minute)(tf)
			tf.Annotations = map[string]string{meta.ReconcileRequestAnnotation: "now"}
			tf.Status.LastHandledReconcileAt = "now"
		}, obs: observation{inputsDigest: "a", plan: &storedPlan{ID: "p", InputsDigest: "a", Applied: true}, outputsWritten: true}, want: decision{action: actionNone, after: 59 * time.Minute}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tf := &infrav1.Terraform{Spec: infrav1.TerraformSpec{Interval: metav1.Duration{Duration: time.Hour}}}
			if tc.mutate != nil {
				tc.mutate(tf)
			}
			tc.obs.now = now
			NewWithT(t).Expect(decide(tf, tc.obs)).To(Equal(tc.want))
		})
	}
}

// The message of a held plan says what it destroys (addresses, bounded),
// why it waits and how to approve it or opt out.
func TestPendingMessageOfADestructivePlan(t *testing.T) {
	g := NewWithT(t)
	var many []string
	for i := range 12 {
		many = append(many, fmt.Sprintf("a.r%02d", i))
	}
	tf := &infrav1.Terraform{Spec: infrav1.TerraformSpec{ApprovePlan: "auto"}}
	tf.Status.Plan = &infrav1.PlanStatus{ID: "p", Pending: "p", Add: 13, Destroy: 14, Replace: 13,
		ResourcesToReplace: append([]string{"a.db"}, many...), ResourcesToDestroy: []string{"b.old"}}
	msg := pendingMessage(tf)
	g.Expect(msg).To(ContainSubstring("plan p (+13 ~0 -14) replaces a.db, a.r00,"))
	g.Expect(msg).To(ContainSubstring("a.r08, ... and 3 more and destroys b.old;"))
	g.Expect(msg).To(ContainSubstring(infrav1.ApproveAnnotation + "=p"))
	g.Expect(msg).To(ContainSubstring("spec.autoApproveDestructive"))

	tf.Status.Plan.ResourcesToReplace, tf.Status.Plan.ResourcesToDestroy = nil, nil
	g.Expect(pendingMessage(tf)).To(ContainSubstring("destroys or replaces 14 resource(s)"), "a runner that does not name them")

	tf.Spec.AutoApproveDestructive = true
	g.Expect(pendingMessage(tf)).NotTo(ContainSubstring("destroys"), "not held: the ordinary message")
}

// An approval left from an earlier plan marks a mismatch only while the
// pending plan waits: under approvePlan auto a plan that destroys nothing
// is applied, whatever the annotation names.
func TestApprovalMismatchOnlyWhileThePlanWaits(t *testing.T) {
	g := NewWithT(t)
	tf := &infrav1.Terraform{Spec: infrav1.TerraformSpec{ApprovePlan: "auto"}}
	tf.Annotations = map[string]string{infrav1.ApproveAnnotation: "old"}
	tf.Status.Plan = &infrav1.PlanStatus{ID: "p", Pending: "p", Add: 1}
	markApprovalMismatch(tf)
	g.Expect(conditions.Get(tf, infrav1.PlannedCondition)).To(BeNil(), "applied at once: no mismatch")

	tf.Status.Plan.Destroy = 1
	markApprovalMismatch(tf)
	g.Expect(conditions.GetReason(tf, infrav1.PlannedCondition)).To(Equal(infrav1.ApprovalMismatchReason), "held: the old approval does not apply it")
	g.Expect(pendingMessage(tf)).To(HavePrefix(`approval "old" does not match the pending plan; plan p (+1 ~0 -1) destroys or replaces 1 resource(s)`))
}

func TestPlanID(t *testing.T) {
	g := NewWithT(t)
	m := planMaterial{
		inputsDigest:  "inputs",
		engine:        "OpenTofu v1.12.6",
		lockFile:      []byte("provider \"x\" {}"),
		stateDigest:   "state",
		changesDigest: "4f2a9c0d1e2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5",
	}
	id := planID("main@sha1:0A1B2C3D4E5F60718293a4b5c6d7e8f901234567", m)
	g.Expect(id).To(MatchRegexp(`^plan-0a1b2c3d4e-[0-9a-f]{10}$`))
	g.Expect(planID("main@sha1:0A1B2C3D4E5F60718293a4b5c6d7e8f901234567", m)).To(Equal(id), "the same material, the same id")
	g.Expect(planID("sha256:abc", m)).To(HavePrefix("plan-abc-"))
	g.Expect(planID("v1.2.0", m)).To(HavePrefix("plan-v120-"))
	g.Expect(planID("", m)).To(HavePrefix("plan-0-"))

	// Anything the plan was made from, or what it plans, changes the id.
	for name, change := range map[string]func(*planMaterial){
		"inputs":  func(m *planMaterial) { m.inputsDigest = "other inputs" },
		"engine":  func(m *planMaterial) { m.engine = "OpenTofu v1.12.7" },
		"lock":    func(m *planMaterial) { m.lockFile = []byte("provider \"y\" {}") },
		"state":   func(m *planMaterial) { m.stateDigest = "state after an apply" },
		"changes": func(m *planMaterial) { m.changesDigest = "5" + m.changesDigest[1:] },
		"applied": func(m *planMaterial) { m.applied = id },
		"failed":  func(m *planMaterial) { m.failed = id },
	} {
		other := m
		change(&other)
		g.Expect(planID("main@sha1:0A1B2C3D4E5F60718293a4b5c6d7e8f901234567", other)).NotTo(Equal(id), "another %s, another id", name)
	}

	// The same state and changes again after plan id was applied (a
	// state restored, drift back): another id, so id's approval is spent.
	after := m
	after.applied = id
	g.Expect(planID("main@sha1:0A1B2C3D4E5F60718293a4b5c6d7e8f901234567", after)).NotTo(Equal(id))
}
