package controllers

import (
	"context"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/testenv"
	"github.com/landform-dev/landform/internal/tfstate"
)

// Deleting a namespace that holds Terraform objects, with the real
// namespace controller sweeping its content: never resources running with
// no state anywhere. No destroy can start there any more, so with Delete
// and with Orphan alike the state is kept (the namespace controller
// cannot delete it) and the object says how to save it: once a person
// saved and released it, the object and the namespace go.
func TestDeletingTheNamespaceKeepsTheState(t *testing.T) {
	ctx := context.Background()
	gc, err := testenv.StartGarbageCollector(ctx, k8sClient, testKubeconfig, t.TempDir())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = gc.Stop() })

	t.Run("delete", func(t *testing.T) {
		g := NewWithT(t)
		ns := newNamespace(t)
		tf, path := newFileTerraform(t, ns, "nsdel", "here", nil)
		waitReady(t, tf)
		obj := deleteNamespaceUntilStalled(t, tf)
		g.Expect(readyMessageOf(obj)).To(ContainSubstring("so the resources stay"))
		keptThenReleased(t, tf)
		g.Expect(readFile(path)).To(Equal("here"), "not destroyed: its state was saved")
	})

	t.Run("orphan", func(t *testing.T) {
		g := NewWithT(t)
		ns := newNamespace(t)
		tf, path := newFileTerraform(t, ns, "nsorphan", "kept", func(tf *infrav1.Terraform) {
			tf.Spec.DeletionPolicy = infrav1.DeletionPolicyOrphan
		})
		waitReady(t, tf)
		obj := deleteNamespaceUntilStalled(t, tf)
		g.Expect(readyMessageOf(obj)).To(ContainSubstring("the state of the resources deletionPolicy Orphan keeps"))
		keptThenReleased(t, tf)
		g.Expect(readFile(path)).To(Equal("kept"), "Orphan kept the resource")
	})
}

// deleteNamespaceUntilStalled deletes tf's namespace and waits for tf to
// stall with NamespaceTerminating.
func deleteNamespaceUntilStalled(t *testing.T, tf *infrav1.Terraform) *infrav1.Terraform {
	t.Helper()
	NewWithT(t).Expect(k8sClient.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tf.Namespace}})).To(Succeed())
	return waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(conditions.IsStalled(obj)).To(BeTrue(), describe(obj))
		g.Expect(readyReasonOf(obj)).To(Equal(infrav1.NamespaceTerminatingReason))
	})
}

// keptThenReleased checks that tf's Stalled message says how to save and
// release its state, that the namespace controller could not delete the
// state Secret, which holds the resource, and then does what a person
// does once it is saved: release it. The object and the namespace go.
func keptThenReleased(t *testing.T, tf *infrav1.Terraform) {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	ns, secret := tf.Namespace, names.StateSecret(tf)
	msg := readyMessageOf(get(g, tf))
	for _, say := range []string{"namespace " + ns + " is being deleted", "Secret " + secret,
		"kubectl get secret -n " + ns + " " + secret, "kubectl patch secret -n " + ns + " " + secret,
		"Delete Terraform objects, and wait for them, before their namespace"} {
		g.Expect(msg).To(ContainSubstring(say))
	}
	state := &corev1.Secret{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, keyOf(ns, secret), state)).To(Succeed())
		g.Expect(state.DeletionTimestamp).NotTo(BeNil(), "the namespace controller asked")
	}).WithTimeout(waitTimeout).WithPolling(pollEvery).Should(Succeed())
	raw, err := tfstate.Decompress(state.Data[tfstate.DataKey])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(raw)).To(ContainSubstring("landform_file"), "the state to save holds the resource")

	g.Expect(k8sClient.Patch(ctx, state, rawMergePatch([]byte(`{"metadata":{"finalizers":null}}`)))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, keyOf("", ns), &corev1.Namespace{}))
	}).WithTimeout(waitTimeout).WithPolling(pollEvery).Should(BeTrue(), "the namespace goes once the state is released")
}
