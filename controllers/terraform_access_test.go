package controllers

import (
	"context"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// References to other namespaces are refused by default, with a condition
// that names them and says how to fix it; nothing runs.
func TestCrossNamespaceReferencesAreRefused(t *testing.T) {
	other := newNamespace(t)
	newGitRepository(t, other, "repo", artifacts.publish(fileModule()))

	cases := map[string]func(*infrav1.Terraform){
		"sourceRef": func(tf *infrav1.Terraform) { tf.Spec.SourceRef.Namespace = other },
		"dependsOn": func(tf *infrav1.Terraform) {
			tf.Spec.DependsOn = []infrav1.DependencyReference{{Name: "elsewhere", Namespace: other}}
		},
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			tf, path := newFileTerraform(t, ns, "cross", "x", func(tf *infrav1.Terraform) {
				mutate(tf)
			})
			obj := waitNotReady(t, tf, infrav1.CrossNamespaceRefDeniedReason)
			g.Expect(readyMessageOf(obj)).To(And(ContainSubstring(other), ContainSubstring("--no-cross-namespace-refs=false")))
			g.Expect(conditions.IsStalled(obj)).To(BeTrue())
			g.Expect(readFile(path)).To(Equal("<missing>"))

			updateSpec(t, tf, func(tf *infrav1.Terraform) {
				tf.Spec.SourceRef.Namespace = ""
				tf.Spec.DependsOn = nil
			})
			waitReady(t, tf)
			g.Expect(readFile(path)).To(Equal("x"))
		})
	}
}

// Deletion honours the refusal too: the destroy never fetches a source in
// another namespace; the object says why it waits, and deleting goes on once
// the reference is fixed.
func TestDeletionRefusesCrossNamespaceSources(t *testing.T) {
	g := NewWithT(t)
	other := newNamespace(t)
	newGitRepository(t, other, "repo", artifacts.publish(fileModule()))
	ns := newNamespace(t)
	tf, path := newFileTerraform(t, ns, "leaving", "x", nil)
	waitReady(t, tf)

	updateSpec(t, tf, func(tf *infrav1.Terraform) { tf.Spec.SourceRef.Namespace = other })
	waitNotReady(t, tf, infrav1.CrossNamespaceRefDeniedReason)
	g.Expect(k8sClient.Delete(context.Background(), get(g, tf))).To(Succeed())
	obj := waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(obj.DeletionTimestamp).NotTo(BeNil())
		g.Expect(readyMessageOf(obj)).To(ContainSubstring("cannot destroy"))
	})
	g.Expect(readyReasonOf(obj)).To(Equal(infrav1.CrossNamespaceRefDeniedReason))
	g.Expect(readFile(path)).To(Equal("x"), "nothing destroyed from the other namespace's source")

	updateSpec(t, tf, func(tf *infrav1.Terraform) { tf.Spec.SourceRef.Namespace = "" })
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(context.Background(), keyOf(ns, "leaving"), &infrav1.Terraform{}))
	}, waitTimeout, pollEvery).Should(BeTrue())
	g.Expect(readFile(path)).To(Equal("<missing>"))
}
