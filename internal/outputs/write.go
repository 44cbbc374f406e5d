package outputs

import (
	"context"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/owned"
)

// ErrNotOwned: the outputs Secret exists and another owner controls it.
var ErrNotOwned = errors.New("secret not owned by this Terraform object")

// fieldOwner is the server-side apply manager of outputs Secrets.
const fieldOwner = "landform-outputs"

// Write creates or updates the Secret spec.Name in owner's namespace with
// exactly data, spec's labels and annotations, Landform's labels and a
// controller reference to owner (none with deletionPolicy Orphan). It uses server-side apply, so keys,
// labels and annotations Landform wrote before and no longer writes are
// removed while those others added are kept. A Secret that exists but is
// not controlled by owner is left alone: ErrNotOwned. (One created by
// someone else between the check and the write with a controller of its own
// is protected too: the API server refuses a second controller reference.)
func Write(ctx context.Context, c client.Client, owner *v1alpha1.Terraform, spec v1alpha1.WriteOutputsToSecretSpec, data map[string][]byte) error {
	var existing corev1.Secret
	if err := check(ctx, c, owner, spec.Name, &existing); err != nil {
		return err
	}

	// Ours last, so a user's labels cannot hide whom the Secret belongs to.
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, owned.Labels(owner))
	secret := corev1ac.Secret(spec.Name, owner.Namespace).
		WithType(corev1.SecretTypeOpaque).
		WithLabels(labels).
		WithData(data)
	// With deletionPolicy Orphan the Secret outlives the object: no owner
	// reference, so that no garbage collection (a foreground deletion
	// included) removes it from the workloads that mount it. Landform's
	// labels say whose it is.
	if owner.GetDeletionPolicy() != v1alpha1.DeletionPolicyOrphan {
		secret.WithOwnerReferences(owned.Reference(owner))
	}
	if len(spec.Annotations) > 0 {
		secret.WithAnnotations(spec.Annotations)
	}
	if existing.ResourceVersion != "" {
		// Apply only to the Secret checked above: if it changed hands in
		// between, the API server answers with a conflict.
		secret.WithResourceVersion(existing.ResourceVersion)
	}
	if err := c.Apply(ctx, secret, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing outputs Secret %s/%s: %w", owner.Namespace, spec.Name, err)
	}
	return nil
}

// Check refuses, with ErrNotOwned, an outputs Secret name that another
// owner already uses: the controller asks before a plan, so that an object
// whose outputs could never be handed over creates nothing.
func Check(ctx context.Context, c client.Reader, owner *v1alpha1.Terraform, name string) error {
	return check(ctx, c, owner, name, &corev1.Secret{})
}

// check reads Secret name into existing (left empty when there is none)
// and refuses one that is not owner's.
func check(ctx context.Context, c client.Reader, owner *v1alpha1.Terraform, name string, existing *corev1.Secret) error {
	err := c.Get(ctx, client.ObjectKey{Namespace: owner.Namespace, Name: name}, existing)
	switch {
	case apierrors.IsNotFound(err):
		*existing = corev1.Secret{}
	case err != nil:
		return fmt.Errorf("reading outputs Secret %s/%s: %w", owner.Namespace, name, err)
	case !ours(existing, owner):
		return fmt.Errorf("%w: Secret %s/%s already exists and Landform will not take over a Secret it does not own; "+
			"rename writeOutputsToSecret.name or delete that Secret", ErrNotOwned, owner.Namespace, name)
	}
	return nil
}

// ours reports whether Landform writes s for owner: controlled by it, or,
// for deletionPolicy Orphan, carrying no controller but Landform's labels
// naming it.
func ours(s *corev1.Secret, owner *v1alpha1.Terraform) bool {
	if metav1.IsControlledBy(s, owner) {
		return true
	}
	if metav1.GetControllerOf(s) != nil {
		return false
	}
	for k, v := range owned.Labels(owner) {
		if s.Labels[k] != v {
			return false
		}
	}
	return true
}
