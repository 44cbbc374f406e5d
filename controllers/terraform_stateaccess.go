package controllers

import (
	"context"
	"errors"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/custody"
)

// The state's custody (who owns it, the identity runners reach it with)
// is internal/custody's; these map its answers onto outcomes.

// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;create;patch;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;create;patch;delete

// claimState makes obj the owner of its state before anything runs: a
// state another live object owns stalls with StateOwnedElsewhere, naming
// the owner.
func (r *TerraformReconciler) claimState(ctx context.Context, obj *infrav1.Terraform) error {
	if err := r.custody.ClaimOnce(ctx, obj); err != nil {
		return stateCustodyError(err)
	}
	return nil
}

// stateCustodyError is a stalling StateOwnedElsewhere for a state that is
// another object's, a retry otherwise.
func stateCustodyError(err error) error {
	var owned *custody.OwnedElsewhereError
	if errors.As(err, &owned) {
		return stalling(infrav1.StateOwnedElsewhereReason, "%v", err)
	}
	return retry(infrav1.StateOwnedElsewhereReason, "checking who owns the state: %v", err)
}
