package controllers

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
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
	} {
		other := m
		change(&other)
		g.Expect(planID("main@sha1:0A1B2C3D4E5F60718293a4b5c6d7e8f901234567", other)).NotTo(Equal(id), "another %s, another id", name)
	}
}
