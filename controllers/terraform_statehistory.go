package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/statehistory"
)

func (r *TerraformReconciler) stateHistory() statehistory.Store {
	return statehistory.Store{Client: r.Client, Reader: r.APIReader, Limit: r.StateHistory}
}

// keepState keeps the state as it is before a run that writes it (an apply
// or a destroy), so that a person can restore it (`landform state
// restore`). A custom backend's state is the backend's to keep. Without
// the copy the run does not start: nothing is written that could not be
// rolled back.
func (r *TerraformReconciler) keepState(ctx context.Context, obj *infrav1.Terraform, why, revision string) error {
	if customBackend(obj) != "" {
		return nil
	}
	_, err := r.stateHistory().Keep(ctx, obj, why, revision)
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		// The namespace is being deleted: no Secret can be created in it,
		// and a version would go with it. The destroy runs without.
		return nil
	}
	if err != nil {
		return retry(infrav1.ApplyFailedReason, "keeping the current state before the %s: %v", why, err)
	}
	return nil
}
