package controllers

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/planstore"
)

// A stored plan whose bytes changed after it was made — here rewritten
// whole, chunk 0's index kept self-consistent, under the approved id — is
// never applied: the controller compares it with the digest it recorded in
// status, refuses it with its own reason and drops it. Planned again, the
// genuine plan gets the approved id back and applies.
func TestTamperedPlanIsNotApplied(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	tf, path := newFileTerraform(t, ns, "tamper", "genuine", func(tf *infrav1.Terraform) {
		tf.Spec.ApprovePlan = ""
		// Long enough to look at the refusal before the next plan.
		tf.Spec.RetryInterval = &metav1.Duration{Duration: time.Hour}
	})
	obj := waitPending(t, tf)
	pending := obj.Status.Plan.Pending
	g.Expect(obj.Status.Plan.Digest).To(MatchRegexp(`^sha256:[a-f0-9]{64}$`))

	store := planstore.Store{Client: k8sClient}
	p, err := store.Load(context.Background(), obj)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Digest).To(Equal(obj.Status.Plan.Digest), "status names the stored bytes")
	p.PlanFile[len(p.PlanFile)/2] ^= 0xff
	g.Expect(store.Save(context.Background(), obj, p)).To(Succeed())
	_, err = store.Load(context.Background(), obj)
	g.Expect(err).NotTo(HaveOccurred(), "the tampered plan is self-consistent")

	approve(g, tf, pending)
	obj = waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(readyReasonOf(obj)).To(Equal(infrav1.PlanDigestMismatchReason))
	})
	g.Expect(conditions.GetReason(obj, infrav1.AppliedCondition)).To(Equal(infrav1.PlanDigestMismatchReason))
	g.Expect(readyMessageOf(obj)).To(ContainSubstring("changed after it was made"))
	g.Expect(obj.Status.LastAppliedPlan).To(BeEmpty())
	g.Expect(obj.PendingPlan()).To(BeEmpty(), "the plan is dropped")
	g.Expect(obj.Status.Run).To(BeNil(), "no run started")
	g.Expect(hasEvent(g, ns, tf.Name, infrav1.PlanDigestMismatchReason, pending)).To(BeTrue())
	_, err = store.LoadMeta(context.Background(), obj)
	g.Expect(err).To(MatchError(planstore.ErrNotFound))
	g.Consistently(func() string { return readFile(path) }).WithTimeout(3*time.Second).Should(Equal("<missing>"), "nothing applied")

	// Planned again from the same inputs and state: the genuine plan, the
	// approved id, applied.
	g.Expect(k8sClient.Patch(context.Background(), get(g, tf), rawMergePatch([]byte(`{"metadata":{"annotations":{"`+reconcileRequestAnnotation+`":"again"}}}`)))).To(Succeed())
	obj = waitReady(t, tf)
	g.Expect(obj.Status.LastAppliedPlan).To(Equal(pending))
	g.Expect(readFile(path)).To(Equal("genuine"))
}
