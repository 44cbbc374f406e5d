// Package owned marks the Secrets Landform writes for a Terraform object
// (plans, outputs) the same way everywhere: who manages them, which object
// they belong to, and an owner reference so they go when it goes.
package owned

import (
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
)

// Labels are the labels every Secret Landform writes for owner carries.
// The owner's name is a label value (names.Label): a name longer than 63
// characters is cut and hashed, and whoever selects by it uses the same.
func Labels(owner *v1alpha1.Terraform) map[string]string {
	return map[string]string{
		v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue,
		v1alpha1.OwnerNameLabel: names.Label(owner.Name),
	}
}

// Reference is a controller owner reference to owner, which blocks the
// owner's foreground deletion until the Secret is gone.
func Reference(owner *v1alpha1.Terraform) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(v1alpha1.GroupVersion.String()).
		WithKind(v1alpha1.TerraformKind).
		WithName(owner.Name).
		WithUID(owner.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}
