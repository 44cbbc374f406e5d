package controllers

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// A manual plan waits with its summary in status; an approval naming another
// plan does nothing and says so; the right id applies exactly that plan.
func TestManualApprovalIsBoundToThePlanID(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	tf, path := newFileTerraform(t, ns, "manual", "manual", manualApproval)

	obj := waitPending(t, tf)
	pending := obj.Status.Plan.Pending
	g.Expect(pending).To(MatchRegexp(`^plan-[a-z0-9]{10}-[a-f0-9]{10}$`))
	g.Expect(obj.Status.Plan.Add).To(Equal(int32(1)))
	g.Expect(obj.Status.Plan.Change).To(BeZero())
	g.Expect(obj.Status.Plan.Destroy).To(BeZero())
	g.Expect(obj.Status.Plan.Resources).To(ConsistOf("landform_file.this"))
	g.Expect(conditions.GetReason(obj, infrav1.PlannedCondition)).To(Equal(infrav1.PlannedWithChangesReason))
	g.Expect(readyMessageOf(obj)).To(ContainSubstring(infrav1.ApproveAnnotation + "=" + pending))
	g.Expect(readFile(path)).To(Equal("<missing>"), "nothing applied before approval")

	// A wrong id: nothing happens, and status says why.
	wrong := "plan-0000000000-0000000000"
	annotate(t, obj, infrav1.ApproveAnnotation, wrong)
	obj = waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(conditions.GetReason(obj, infrav1.PlannedCondition)).To(Equal(infrav1.ApprovalMismatchReason))
	})
	g.Expect(conditions.GetMessage(obj, infrav1.PlannedCondition)).To(ContainSubstring(wrong))
	g.Expect(readyMessageOf(obj)).To(ContainSubstring("does not match"))
	g.Expect(obj.Status.Plan.Pending).To(Equal(pending))
	g.Consistently(func() string { return readFile(path) }).WithTimeout(3 * time.Second).Should(Equal("<missing>"))

	// The right id applies that plan.
	annotate(t, obj, infrav1.ApproveAnnotation, pending)
	obj = waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(obj.Status.LastAppliedPlan).To(Equal(pending))
		g.Expect(conditions.IsReady(obj)).To(BeTrue())
	})
	g.Expect(obj.Status.LastAppliedPlan).To(Equal(pending), describe(obj))
	g.Expect(obj.Status.Plan.Pending).To(BeEmpty())
	g.Expect(readFile(path)).To(Equal("manual"))
}

// spec.approvePlan set to a plan id approves that plan through Git.
func TestApprovePlanInSpec(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	tf, path := newFileTerraform(t, ns, "gitops", "gitops", manualApproval)
	obj := waitPending(t, tf)
	obj.Spec.ApprovePlan = obj.Status.Plan.Pending
	g.Expect(k8sClient.Update(context.Background(), obj)).To(Succeed())
	obj = waitReady(t, tf)
	g.Expect(obj.Status.LastAppliedPlan).To(Equal(obj.Spec.ApprovePlan), "the same changes re-planned keep their id")
	g.Expect(readFile(path)).To(Equal("gitops"))
}

// An approval never carries over to a plan made from other inputs: after
// plan X was approved and applied, a change of workspace or of a variable
// at the same revision makes a plan with its own id that waits, even where
// it plans the same changes; a re-plan while it waits keeps its id.
func TestApprovalDoesNotCarryOverToOtherInputs(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	tf, path := newFileTerraform(t, ns, "carry", "one", manualApproval)
	first := waitPending(t, tf).Status.Plan.Pending
	approve(g, tf, first)
	waitReady(t, tf)

	pendingOtherThan := func(old string) string {
		var id string
		waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
			g.Expect(readyReasonOf(obj)).To(Equal(infrav1.PlanPendingReason))
			g.Expect(obj.PendingPlan()).NotTo(BeEmpty())
			g.Expect(obj.PendingPlan()).NotTo(Equal(old))
			id = obj.PendingPlan()
		})
		return id
	}
	// Another workspace: the same changes (the file, created), another plan.
	g.Expect(k8sClient.Patch(context.Background(), get(g, tf), rawMergePatch([]byte(`{"spec":{"workspace":"other"}}`)))).To(Succeed())
	second := pendingOtherThan(first)
	g.Consistently(func(g Gomega) {
		g.Expect(get(g, tf).Status.LastAppliedPlan).To(Equal(first))
	}, 4*time.Second, time.Second).Should(Succeed(), "the approval of %s does not apply %s", first, second)

	// A re-plan while it waits, against the same state and inputs, keeps it.
	g.Expect(k8sClient.Patch(context.Background(), get(g, tf), rawMergePatch([]byte(`{"metadata":{"annotations":{"`+reconcileRequestAnnotation+`":"again"}}}`)))).To(Succeed())
	waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(obj.Status.LastHandledReconcileAt).To(Equal("again"))
		g.Expect(obj.PendingPlan()).To(Equal(second))
	})
	approve(g, tf, second)
	g.Expect(waitReady(t, tf).Status.LastAppliedPlan).To(Equal(second))

	// Another variable value: another plan, waiting for its own approval.
	g.Expect(k8sClient.Patch(context.Background(), get(g, tf), rawMergePatch([]byte(`{"spec":{"vars":[{"name":"path","value":"`+path+`"},{"name":"content","value":"two"}]}}`)))).To(Succeed())
	third := pendingOtherThan(second)
	g.Expect(third).NotTo(Equal(first))
	g.Expect(get(g, tf).Status.LastAppliedPlan).To(Equal(second))
}

// The engine and its version are inputs too: a plan pending from one
// engine, planned again by another against the same state and with the
// same changes, gets its own id; the first plan's approval applies nothing.
func TestApprovalDoesNotCarryOverToAnotherEngine(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	tf, path := newFileTerraform(t, ns, "engine", "engine", func(tf *infrav1.Terraform) {
		tf.Labels = map[string]string{podPlacementLabel: "terraform"}
		tf.Spec.ApprovePlan = ""
	})
	byTerraform := waitPending(t, tf).Status.Plan.Pending

	// The same module, inputs and state, planned by OpenTofu.
	g.Expect(k8sClient.Patch(context.Background(), get(g, tf), rawMergePatch([]byte(`{"metadata":{"labels":{"`+podPlacementLabel+`":null},"annotations":{"`+reconcileRequestAnnotation+`":"tofu"}}}`)))).To(Succeed())
	var byTofu string
	waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(obj.Status.LastHandledReconcileAt).To(Equal("tofu"))
		g.Expect(obj.PendingPlan()).NotTo(BeEmpty())
		g.Expect(obj.PendingPlan()).NotTo(Equal(byTerraform))
		byTofu = obj.PendingPlan()
	})
	g.Expect(get(g, tf).Status.Plan.Add).To(Equal(int32(1)), "the same changes")

	approve(g, tf, byTerraform)
	obj := waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(conditions.GetReason(obj, infrav1.PlannedCondition)).To(Equal(infrav1.ApprovalMismatchReason))
	})
	g.Expect(obj.PendingPlan()).To(Equal(byTofu))
	g.Consistently(func() string { return readFile(path) }).WithTimeout(3*time.Second).Should(Equal("<missing>"), "the other engine's approval applies nothing")

	approve(g, tf, byTofu)
	g.Expect(waitReady(t, tf).Status.LastAppliedPlan).To(Equal(byTofu))
	g.Expect(readFile(path)).To(Equal("engine"))
}
