// Package owned marks the Secrets Landform writes for a Terraform object
// (plans, outputs) the same way everywhere: who manages them, which object
// they belong to, and an owner reference so they go when it goes.
package owned

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// maxLabelValue is Kubernetes' limit on a label value.
const maxLabelValue = 63

// LabelValue returns name as a valid label value. Object names may be up to
// 253 characters but label values only 63, so a longer name is cut and
// suffixed with a hash of the whole name to stay unique.
func LabelValue(name string) string {
	if len(name) <= maxLabelValue {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	suffix := hex.EncodeToString(sum[:])[:8]
	head := strings.TrimRight(name[:maxLabelValue-len(suffix)-1], "-_.")
	return head + "-" + suffix
}

// Labels are the labels every Secret Landform writes for owner carries.
func Labels(owner *v1alpha1.Terraform) map[string]string {
	return map[string]string{
		v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue,
		v1alpha1.OwnerNameLabel: LabelValue(owner.Name),
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
