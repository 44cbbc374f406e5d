package controllers

import (
	"context"
	"testing"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/testenv"
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

// An object whose plan waits for approval has a state that holds no
// resources (the empty state its claim made): deleting it runs no
// destroy, even with its source gone, and its state goes with it.
func TestDeletePlannedNeverAppliedRunsNoDestroy(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	tf, path := newFileTerraform(t, ns, "planned", "never", manualApproval)
	waitPending(t, tf)
	g.Expect(secretData(g, ns, "tfstate-default-planned")).To(HaveKey("tfstate"), "the claim made the state")
	repo := &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "repo"}}
	g.Expect(k8sClient.Delete(context.Background(), repo)).To(Succeed())

	deleteAndWait(t, tf)
	g.Expect(readFile(path)).To(Equal("<missing>"), "nothing was ever created")
	g.Expect(secretData(g, ns, "tfstate-default-planned")).To(BeNil(), "state deleted")
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
	g.Expect(readyMessageOf(obj)).To(ContainSubstring("spec.suspend"))
	g.Consistently(func() string { return readFile(path) }, 3*time.Second, time.Second).Should(Equal("kept"), "nothing destroyed while suspended")

	g.Expect(k8sClient.Patch(context.Background(), get(g, tf), rawMergePatch([]byte(`{"spec":{"suspend":false}}`)))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(context.Background(), keyOf(ns, "paused"), &infrav1.Terraform{}))
	}, waitTimeout, pollEvery).Should(BeTrue())
	g.Expect(readFile(path)).To(Equal("<missing>"), "destroyed once resumed")
}

// With deletionPolicy Orphan the outputs Secret and the state outlive the
// object under Kubernetes' real garbage collector (kube-controller-manager),
// in a background deletion and in a foreground one, where the collector
// deletes the dependents before the owner and, here, before Landform's
// finalizer has acted: whether the object was Orphan from the start or
// switched to it later. With Delete, the counter-case, the outputs Secret,
// the state and the resource go, in a background and in a foreground
// deletion (where the collector deletes the object's state identity before
// the destroy: Landform makes it again, unowned, and removes it once the
// destroy is done). In every case a ConfigMap owned by the
// same object is collected, so the collector was at work on this object's
// dependents: the test cannot pass with a collector that does nothing.
func TestOrphanSurvivesTheGarbageCollector(t *testing.T) {
	ctx := context.Background()
	gc, err := testenv.StartGarbageCollector(ctx, k8sClient, testKubeconfig, t.TempDir())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = gc.Stop() })

	background, foreground := metav1.DeletePropagationBackground, metav1.DeletePropagationForeground
	for _, tc := range []struct {
		name        string
		policy      infrav1.DeletionPolicy
		switched    bool // created with Delete, switched to Orphan once applied
		propagation metav1.DeletionPropagation
	}{
		{name: "orphan-background", policy: infrav1.DeletionPolicyOrphan, propagation: background},
		{name: "orphan-foreground", policy: infrav1.DeletionPolicyOrphan, propagation: foreground},
		{name: "switched-background", policy: infrav1.DeletionPolicyOrphan, switched: true, propagation: background},
		{name: "switched-foreground", policy: infrav1.DeletionPolicyOrphan, switched: true, propagation: foreground},
		{name: "delete-background", policy: infrav1.DeletionPolicyDelete, propagation: background},
		{name: "delete-foreground", policy: infrav1.DeletionPolicyDelete, propagation: foreground},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			outputs := tc.name + "-outputs"
			tf, path := newFileTerraform(t, ns, tc.name, "stay", func(tf *infrav1.Terraform) {
				tf.Spec.DeletionPolicy = tc.policy
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
			g.Expect(secretData(g, ns, "tfstate-default-"+tc.name)).To(HaveKey("tfstate"), "applied with a state")
			control := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "control", OwnerReferences: []metav1.OwnerReference{{
				APIVersion: infrav1.GroupVersion.String(), Kind: infrav1.TerraformKind, Name: obj.Name, UID: obj.UID,
			}}}}
			g.Expect(k8sClient.Create(ctx, control)).To(Succeed())

			survives := func(g Gomega) {
				// The collector queued the object's dependents together;
				// give it time to reach the Secret, were it one of them.
				g.Consistently(func(g Gomega) {
					g.Expect(string(secret(g, ns, outputs).Data["path"])).To(Equal(path))
				}, 3*time.Second, pollEvery).Should(Succeed(), "the outputs Secret and its content survive")
				g.Expect(secretData(g, ns, "tfstate-default-"+tc.name)).To(HaveKey("tfstate"), "the state survives")
			}
			controlCollected := func() bool {
				return apierrors.IsNotFound(k8sClient.Get(ctx, keyOf(ns, "control"), &corev1.ConfigMap{}))
			}

			// Suspended, Landform holds the deletion without acting on it:
			// the worst moment, when a foreground deletion's collector
			// reaches the object's dependents before Landform's finalizer
			// did anything, as it does when the controller is down or busy.
			g.Expect(k8sClient.Patch(ctx, get(g, tf), rawMergePatch([]byte(`{"spec":{"suspend":true}}`)))).To(Succeed())
			g.Expect(k8sClient.Delete(ctx, get(g, tf), client.PropagationPolicy(tc.propagation))).To(Succeed())
			if tc.propagation == foreground {
				g.Eventually(controlCollected, waitTimeout, pollEvery).Should(BeTrue(),
					"a foreground deletion collects the dependents first (see %s)", gc.Log)
				g.Expect(get(g, tf).DeletionTimestamp).NotTo(BeNil(), "the object waits for Landform")
				if tc.policy == infrav1.DeletionPolicyOrphan {
					survives(g)
				}
			}
			g.Expect(k8sClient.Patch(ctx, get(g, tf), rawMergePatch([]byte(`{"spec":{"suspend":false}}`)))).To(Succeed())
			g.Eventually(func() bool {
				return apierrors.IsNotFound(k8sClient.Get(ctx, keyOf(ns, tf.Name), &infrav1.Terraform{}))
			}, waitTimeout, pollEvery).Should(BeTrue(), func() string { return describe(get(NewWithT(t), tf)) })
			g.Eventually(controlCollected, waitTimeout, pollEvery).Should(BeTrue(),
				"the garbage collector collects what the object owned (see %s)", gc.Log)

			if tc.policy == infrav1.DeletionPolicyDelete {
				g.Expect(secretData(g, ns, outputs)).To(BeNil(), "the outputs Secret goes with the object")
				g.Expect(secretData(g, ns, "tfstate-default-"+tc.name)).To(BeNil(), "the state goes")
				g.Expect(readFile(path)).To(Equal("<missing>"), "the resource is destroyed")
				g.Expect(k8sClient.Get(ctx, keyOf(ns, "landform-state-"+tc.name), &corev1.ServiceAccount{})).To(
					WithTransform(apierrors.IsNotFound, BeTrue()), "the state identity is removed")
				return
			}
			survives(g)
			g.Expect(readFile(path)).To(Equal("stay"), "the resource too")
		})
	}
}

func secret(g Gomega, ns, name string) *corev1.Secret {
	s := &corev1.Secret{}
	g.Expect(k8sClient.Get(context.Background(), keyOf(ns, name), s)).To(Succeed())
	return s
}
