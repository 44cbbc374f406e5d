package outputs

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// End is what becomes of owner's outputs Secret name when owner is
// deleted: with deletionPolicy Delete it is deleted if owner controls it
// (read as metadata: its data is never read); with Orphan owner lets go
// of it (its owner reference goes), so that the garbage collector keeps
// it and the workloads that mount it go on. A Secret that is not there,
// or that owner does not control, is left alone.
func End(ctx context.Context, c client.Client, reader client.Reader, owner *v1alpha1.Terraform, name string) error {
	if owner.GetDeletionPolicy() == v1alpha1.DeletionPolicyOrphan {
		return Release(ctx, c, owner, name)
	}
	s := &metav1.PartialObjectMetadata{}
	s.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := reader.Get(ctx, client.ObjectKey{Namespace: owner.Namespace, Name: name}, s)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading outputs Secret %s: %w", name, err)
	}
	if !metav1.IsControlledBy(s, owner) {
		return nil
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: owner.Namespace, Name: name}}
	if err := c.Delete(ctx, secret, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting outputs Secret %s/%s: %w", owner.Namespace, name, err)
	}
	return nil
}

// Release drops owner's references from Secret name: it outlives owner,
// whatever deletes owner (a foreground deletion's garbage collector
// included).
func Release(ctx context.Context, c client.Client, owner *v1alpha1.Terraform, name string) error {
	secret := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: owner.Namespace, Name: name}, secret)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading outputs Secret %s: %w", name, err)
	}
	before := secret.DeepCopy()
	var kept []metav1.OwnerReference
	for _, ref := range secret.OwnerReferences {
		if ref.UID != owner.UID {
			kept = append(kept, ref)
		}
	}
	if len(kept) == len(secret.OwnerReferences) {
		return nil
	}
	secret.OwnerReferences = kept
	if err := c.Patch(ctx, secret, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("keeping outputs Secret %s (deletionPolicy Orphan): %w", name, err)
	}
	return nil
}
