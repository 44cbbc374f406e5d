package controllers

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/testenv"
)

// With deletionPolicy Orphan the outputs Secret and the state outlive the
// object under Kubernetes' real garbage collector (kube-controller-manager),
// even in a foreground deletion, where the collector deletes dependents
// before the owner: whether the object was Orphan from the start or
// switched to it later. A ConfigMap owned by the same object is collected,
// so the collector was at work.
func TestOrphanSurvivesTheGarbageCollector(t *testing.T) {
	ctx := context.Background()
	gc, err := testenv.StartGarbageCollector(ctx, k8sClient, testKubeconfig, t.TempDir())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = gc.Stop() })

	for _, tc := range []struct {
		name     string
		switched bool
	}{{name: "orphan"}, {name: "switched", switched: true}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			newGitRepository(t, ns, "repo", artifacts.publish(fileModule()))
			path := effectPath(t)
			outputs := tc.name + "-outputs"
			tf := newTerraform(t, ns, tc.name, func(tf *infrav1.Terraform) {
				tf.Spec.Vars = fileVars(path, "stay")
				tf.Spec.DeletionPolicy = infrav1.DeletionPolicyOrphan
				if tc.switched {
					tf.Spec.DeletionPolicy = infrav1.DeletionPolicyDelete
				}
				tf.Spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{Name: outputs}
			})
			obj := waitReady(t, tf)
			if tc.switched {
				g.Expect(metav1.IsControlledBy(secret(g, ns, outputs), obj)).To(BeTrue(), "owned under Delete")
				g.Expect(k8sClient.Patch(ctx, obj, rawMergePatch([]byte(`{"spec":{"deletionPolicy":"Orphan"}}`)))).To(Succeed())
				g.Eventually(func(g Gomega) {
					g.Expect(secret(g, ns, outputs).OwnerReferences).To(BeEmpty())
				}, waitTimeout, pollEvery).Should(Succeed(), "released once switched to Orphan")
			}
			control := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "control", OwnerReferences: []metav1.OwnerReference{{
				APIVersion: infrav1.GroupVersion.String(), Kind: infrav1.TerraformKind, Name: obj.Name, UID: obj.UID,
			}}}}
			g.Expect(k8sClient.Create(ctx, control)).To(Succeed())

			g.Expect(k8sClient.Delete(ctx, get(g, tf), client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
			g.Eventually(func() bool {
				return apierrors.IsNotFound(k8sClient.Get(ctx, keyOf(ns, tf.Name), &infrav1.Terraform{}))
			}, waitTimeout, pollEvery).Should(BeTrue(), "the object goes")
			g.Eventually(func() bool {
				return apierrors.IsNotFound(k8sClient.Get(ctx, keyOf(ns, "control"), &corev1.ConfigMap{}))
			}, waitTimeout, pollEvery).Should(BeTrue(), "the garbage collector collected what the object owned")

			out := secret(g, ns, outputs)
			g.Expect(string(out.Data["path"])).To(Equal(path), "the outputs Secret and its content survive")
			g.Expect(secretData(g, ns, "tfstate-default-"+tc.name)).To(HaveKey("tfstate"), "the state survives")
			g.Expect(readFile(path)).To(Equal("stay"), "the resources too")
		})
	}
}

func secret(g Gomega, ns, name string) *corev1.Secret {
	s := &corev1.Secret{}
	g.Expect(k8sClient.Get(context.Background(), keyOf(ns, name), s)).To(Succeed())
	return s
}
