package approval

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// A plan status does not summarise is held: nothing says it destroys
// nothing. One it does is held only when it destroys something.
func TestHeldAsDestructive(t *testing.T) {
	g := NewWithT(t)
	tf := &infrav1.Terraform{Spec: infrav1.TerraformSpec{ApprovePlan: "auto"}}
	g.Expect(HeldAsDestructive(tf, "p")).To(BeTrue(), "no status")
	tf.Status.Plan = &infrav1.PlanStatus{ID: "q", Pending: "q"}
	g.Expect(HeldAsDestructive(tf, "p")).To(BeTrue(), "status summarises another plan")
	tf.Status.Plan = &infrav1.PlanStatus{ID: "p", Pending: "p", Add: 2, Change: 1}
	g.Expect(HeldAsDestructive(tf, "p")).To(BeFalse(), "creates and updates only")
	g.Expect(Applies(tf, "p")).To(BeTrue())
	tf.Status.Plan.Destroy = 1
	g.Expect(HeldAsDestructive(tf, "p")).To(BeTrue(), "a destroy")
	g.Expect(Applies(tf, "p")).To(BeFalse())
	tf.Status.Plan.IsDestroy = true
	g.Expect(HeldAsDestructive(tf, "p")).To(BeFalse(), "spec.destroy asked for exactly this")
	tf.Status.Plan.IsDestroy = false
	tf.Spec.AutoApproveDestructive = true
	g.Expect(Applies(tf, "p")).To(BeTrue(), "autoApproveDestructive lifts the hold")
}

// Of answers the controller, the CLI and the web view alike; each case is
// one a user met where two of them disagreed, or one of them broke.
func TestOf(t *testing.T) {
	now := metav1.Now()
	pending := func(p *infrav1.PlanStatus) func(*infrav1.Terraform) {
		return func(tf *infrav1.Terraform) { tf.Status.Plan = p }
	}
	gatedDeletion := func(tf *infrav1.Terraform) {
		tf.DeletionTimestamp = &now
		tf.Spec.DestroyApproval = infrav1.DestroyApprovalManual
	}
	cases := []struct {
		name   string
		mutate []func(*infrav1.Terraform)
		want   Standing
	}{
		{name: "no status at all", want: NoPendingPlan},
		{name: "a plan applied, none pending", mutate: []func(*infrav1.Terraform){pending(&infrav1.PlanStatus{ID: "p"})}, want: NoPendingPlan},
		{name: "manual: waits", mutate: []func(*infrav1.Terraform){pending(&infrav1.PlanStatus{ID: "p", Pending: "p", Add: 1})}, want: NeedsApproval},
		{name: "approved by the annotation", mutate: []func(*infrav1.Terraform){
			pending(&infrav1.PlanStatus{ID: "p", Pending: "p"}),
			func(tf *infrav1.Terraform) { tf.Annotations = map[string]string{infrav1.ApproveAnnotation: "p"} },
		}, want: Approved},
		{name: "an approval of another plan is none", mutate: []func(*infrav1.Terraform){
			pending(&infrav1.PlanStatus{ID: "p", Pending: "p"}),
			func(tf *infrav1.Terraform) { tf.Spec.ApprovePlan = "q" },
		}, want: NeedsApproval},
		{name: "auto applies a plan that creates", mutate: []func(*infrav1.Terraform){
			pending(&infrav1.PlanStatus{ID: "p", Pending: "p", Add: 1}),
			func(tf *infrav1.Terraform) { tf.Spec.ApprovePlan = infrav1.ApprovePlanAuto },
		}, want: AutoApproved},
		{name: "auto holds a plan that destroys", mutate: []func(*infrav1.Terraform){
			pending(&infrav1.PlanStatus{ID: "p", Pending: "p", Destroy: 1}),
			func(tf *infrav1.Terraform) { tf.Spec.ApprovePlan = infrav1.ApprovePlanAuto },
		}, want: NeedsApproval},
		{name: "planOnly", mutate: []func(*infrav1.Terraform){
			pending(&infrav1.PlanStatus{ID: "p", Pending: "p"}),
			func(tf *infrav1.Terraform) { tf.Spec.PlanOnly = true },
		}, want: NotAppliedPlanOnly},
		{name: "a preview, even approved", mutate: []func(*infrav1.Terraform){
			pending(&infrav1.PlanStatus{ID: "p", Pending: "p"}),
			func(tf *infrav1.Terraform) {
				tf.Spec.Preview = &infrav1.PreviewSpec{}
				tf.Spec.ApprovePlan = "p"
			},
		}, want: NotAppliedPreview},
		{name: "gated deletion: its destroy plan waits although auto", mutate: []func(*infrav1.Terraform){
			pending(&infrav1.PlanStatus{ID: "d", Pending: "d", Destroy: 1, IsDestroy: true}),
			gatedDeletion,
			func(tf *infrav1.Terraform) { tf.Spec.ApprovePlan = infrav1.ApprovePlanAuto },
		}, want: NeedsApproval},
		{name: "gated deletion: its destroy plan waits although planOnly", mutate: []func(*infrav1.Terraform){
			pending(&infrav1.PlanStatus{ID: "d", Pending: "d", Destroy: 1, IsDestroy: true}),
			gatedDeletion,
			func(tf *infrav1.Terraform) { tf.Spec.PlanOnly = true },
		}, want: NeedsApproval},
		{name: "gated deletion before its destroy plan: nothing pending, no crash", mutate: []func(*infrav1.Terraform){gatedDeletion}, want: NoPendingPlan},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tf := &infrav1.Terraform{}
			for _, m := range tc.mutate {
				m(tf)
			}
			NewWithT(t).Expect(Of(tf)).To(Equal(tc.want))
		})
	}
}
