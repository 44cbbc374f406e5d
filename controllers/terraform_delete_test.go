package controllers

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// deletionPolicy Delete destroys the resources, then the state and the
// outputs Secret, then lets the object go.
func TestDeleteDestroysResourcesAndState(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	tf, path := newFileTerraform(t, ns, "doomed", "bye", func(tf *infrav1.Terraform) {
		tf.Spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{Name: "doomed-outputs"}
	})
	waitReady(t, tf)
	g.Expect(readFile(path)).To(Equal("bye"))
	g.Expect(secretData(g, ns, "tfstate-default-doomed")).NotTo(BeNil())

	deleteAndWait(t, tf)
	g.Expect(readFile(path)).To(Equal("<missing>"), "destroyed")
	g.Expect(secretData(g, ns, "tfstate-default-doomed")).To(BeNil(), "state deleted")
	g.Expect(secretData(g, ns, "doomed-outputs")).To(BeNil(), "outputs deleted")
}

// deletionPolicy Orphan keeps the resources and the state.
func TestOrphanKeepsResourcesAndState(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	tf, path := newFileTerraform(t, ns, "orphan", "stay", func(tf *infrav1.Terraform) {
		tf.Spec.DeletionPolicy = infrav1.DeletionPolicyOrphan
		tf.Spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{Name: "orphan-outputs"}
	})
	obj := waitReady(t, tf)
	out := &corev1.Secret{}
	g.Expect(k8sClient.Get(context.Background(), keyOf(ns, "orphan-outputs"), out)).To(Succeed())
	g.Expect(out.OwnerReferences).To(BeEmpty(), "no owner reference, even while the object lives: nothing may collect it")
	g.Expect(out.Labels).To(HaveKeyWithValue(infrav1.OwnerNameLabel, "orphan"), "Landform's labels say whose it is")

	deleteAndWait(t, tf)
	g.Expect(readFile(path)).To(Equal("stay"), "resources kept")
	g.Expect(secretData(g, ns, "tfstate-default-orphan")).NotTo(BeNil(), "state kept")
	g.Expect(k8sClient.Get(context.Background(), keyOf(ns, "orphan-outputs"), out)).To(Succeed())
	g.Expect(string(out.Data["path"])).To(Equal(path), "outputs kept")
	for _, ref := range out.OwnerReferences {
		g.Expect(ref.UID).NotTo(Equal(obj.UID), "no owner reference left for the garbage collector to follow")
	}
}

// An object that never applied anything is deleted at once, even when its
// source is missing.
func TestDeleteNeverAppliedIsImmediate(t *testing.T) {
	ns := newNamespace(t)
	tf := newTerraform(t, ns, "never", func(tf *infrav1.Terraform) {
		tf.Spec.SourceRef.Name = "does-not-exist"
	})
	waitNotReady(t, tf, infrav1.SourceNotFoundReason)
	NewWithT(t).Expect(k8sClient.Get(context.Background(), keyOf(ns, "never"), tf)).To(Succeed())
	deleteAndWait(t, tf)
}

// A suspended object being deleted destroys nothing and says why: Ready is
// False, reason Suspended. Resuming it lets the deletion go on.
func TestSuspendedDeletionWaitsAndSaysSo(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	tf, path := newFileTerraform(t, ns, "paused", "kept", nil)
	waitReady(t, tf)
	g.Expect(k8sClient.Patch(context.Background(), get(g, tf), rawMergePatch([]byte(`{"spec":{"suspend":true}}`)))).To(Succeed())
	g.Expect(k8sClient.Delete(context.Background(), get(g, tf))).To(Succeed())

	obj := waitNotReady(t, tf, infrav1.SuspendedReason)
	g.Expect(conditions.GetMessage(obj, meta.ReadyCondition)).To(ContainSubstring("spec.suspend"))
	g.Consistently(func() string { return readFile(path) }, 3*time.Second, time.Second).Should(Equal("kept"), "nothing destroyed while suspended")

	g.Expect(k8sClient.Patch(context.Background(), get(g, tf), rawMergePatch([]byte(`{"spec":{"suspend":false}}`)))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(context.Background(), keyOf(ns, "paused"), &infrav1.Terraform{}))
	}, waitTimeout, pollEvery).Should(BeTrue())
	g.Expect(readFile(path)).To(Equal("<missing>"), "destroyed once resumed")
}
