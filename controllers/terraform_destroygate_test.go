package controllers

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// With spec.destroyApproval manual, deleting the object plans the destroy
// and waits: nothing is destroyed until that plan is approved — here with
// `landform approve`, after `landform status` showed it — and then the
// object goes with its resources.
func TestDestroyGateWaitsForTheDestroyPlansApproval(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	tf, path := newFileTerraform(t, ns, "gated", "kept", func(tf *infrav1.Terraform) {
		tf.Spec.ApprovePlan = ""
		tf.Spec.DestroyApproval = infrav1.DestroyApprovalManual
	})
	approve(g, tf, waitPending(t, tf).Status.Plan.Pending)
	applied := waitReady(t, tf).Status.LastAppliedPlan
	g.Expect(readFile(path)).To(Equal("kept"))

	g.Expect(k8sClient.Delete(ctx, get(g, tf))).To(Succeed())
	obj := waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(obj.Status.Plan).NotTo(BeNil())
		g.Expect(obj.Status.Plan.IsDestroy).To(BeTrue())
		g.Expect(obj.PendingPlan()).NotTo(BeEmpty())
		g.Expect(readyReasonOf(obj)).To(Equal(infrav1.PlanPendingReason))
	})
	destroyPlan := obj.PendingPlan()
	g.Expect(destroyPlan).NotTo(Equal(applied))
	g.Expect(obj.Status.Plan.Destroy).To(Equal(int32(1)))
	g.Expect(readyMessageOf(obj)).To(ContainSubstring("destroy plan " + destroyPlan))
	g.Consistently(func(g Gomega) {
		g.Expect(readFile(path)).To(Equal("kept"))
		g.Expect(get(g, tf).DeletionTimestamp).NotTo(BeNil(), "the object waits")
	}, 4*time.Second, time.Second).Should(Succeed(), "nothing destroyed before the approval")

	landform := func(args ...string) string {
		out, errOut, err := runCLI(ns, args...)
		g.Expect(err).NotTo(HaveOccurred(), errOut)
		return out
	}
	status := landform("status", tf.Name)
	g.Expect(status).To(ContainSubstring(destroyPlan))
	g.Expect(status).To(ContainSubstring("the object is being deleted"))
	g.Expect(landform("approve", tf.Name, "--yes")).To(ContainSubstring("Approved plan " + destroyPlan))

	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, keyOf(ns, tf.Name), &infrav1.Terraform{}))
	}, waitTimeout, pollEvery).Should(BeTrue(), "the object goes once its destroy plan is applied")
	g.Expect(readFile(path)).To(Equal("<missing>"), "destroyed")
}
