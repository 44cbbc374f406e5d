package controllers

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/metrics"
	"github.com/landform-dev/landform/internal/runlog"
)

// reconcileDelete destroys the resources (deletionPolicy Delete) or keeps
// them (Orphan), cleans up what Landform created, and removes the finalizer.
func (r *TerraformReconciler) reconcileDelete(ctx context.Context, obj *infrav1.Terraform) error {
	if !controllerutil.ContainsFinalizer(obj, infrav1.Finalizer) {
		return nil
	}
	if obj.Spec.Suspend {
		conditions.MarkFalse(obj, meta.ReadyCondition, infrav1.SuspendedReason, "deletion waits: the object is suspended; set spec.suspend to false to destroy")
		return nil
	}
	if obj.GetDeletionPolicy() == infrav1.DeletionPolicyDelete {
		hasState, err := r.hasState(ctx, obj)
		if err != nil {
			return err
		}
		if hasState || obj.Status.LastAppliedRevision != "" {
			if err := r.destroy(ctx, obj); err != nil {
				return err
			}
		}
		if err := r.deleteSecret(ctx, obj.Namespace, obj.GetStateSecretName()); err != nil {
			return err
		}
	}
	if err := r.Plans.Delete(ctx, obj); err != nil {
		return retry(infrav1.DestroyFailedReason, "deleting stored plans: %v", err)
	}
	if s := obj.Spec.WriteOutputsToSecret; s != nil && obj.GetDeletionPolicy() == infrav1.DeletionPolicyDelete {
		if err := r.deleteOwnedSecret(ctx, obj, s.Name); err != nil {
			return err
		}
	}
	controllerutil.RemoveFinalizer(obj, infrav1.Finalizer)
	return nil
}

// destroy runs terraform destroy with the current source and vars.
func (r *TerraformReconciler) destroy(ctx context.Context, obj *infrav1.Terraform) error {
	conditions.MarkReconciling(obj, infrav1.DeletingReason, "destroying resources")
	ws, err := r.prepareWorkspace(ctx, obj)
	if err != nil {
		return retry(infrav1.DestroyFailedReason, "cannot destroy: %v (or set deletionPolicy: Orphan to keep the resources)", err)
	}
	ctx, cancel := context.WithTimeout(ctx, obj.GetTimeout())
	defer cancel()
	rn, err := r.startRunner(ctx, obj, ws)
	if err != nil {
		return retry(infrav1.DestroyFailedReason, "cannot destroy: %v", err)
	}
	defer func() { _ = rn.Stop() }()
	logf, endLog := r.startLog(ctx, obj, ws, runlog.PhaseDestroy)
	err = rn.Client.Destroy(ctx, logf)
	endLog(err)
	metrics.CountRun("destroy", err)
	if err != nil {
		ferr := r.runnerFailure(obj, ws, err, infrav1.DestroyFailedReason)
		r.event(obj, ws.artifact.Revision, corev1.EventTypeWarning, infrav1.DestroyFailedReason, "destroy failed: %s", ferr.Error())
		return retry(errorReason(ferr, infrav1.DestroyFailedReason), "destroying: %v", ferr)
	}
	r.event(obj, ws.artifact.Revision, corev1.EventTypeNormal, infrav1.DeletingReason, "destroyed the resources of revision %s", ws.artifact.Revision)
	return nil
}

// hasState reports whether the default backend's state Secret exists.
func (r *TerraformReconciler) hasState(ctx context.Context, obj *infrav1.Terraform) (bool, error) {
	if customBackend(obj) != "" {
		return obj.Status.LastAppliedRevision != "", nil
	}
	s, err := r.secretMeta(ctx, obj.Namespace, obj.GetStateSecretName())
	if err != nil {
		return false, fmt.Errorf("checking for state Secret %s: %w", obj.GetStateSecretName(), err)
	}
	return s != nil, nil
}

func (r *TerraformReconciler) deleteSecret(ctx context.Context, namespace, name string) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := r.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
		return retry(infrav1.DestroyFailedReason, "deleting Secret %s/%s: %v", namespace, name, err)
	}
	return nil
}

// deleteOwnedSecret deletes the outputs Secret if this object controls it.
func (r *TerraformReconciler) deleteOwnedSecret(ctx context.Context, obj *infrav1.Terraform, name string) error {
	s, err := r.secretMeta(ctx, obj.Namespace, name)
	if err != nil {
		return retry(infrav1.DestroyFailedReason, "reading outputs Secret %s: %v", name, err)
	}
	if s == nil {
		return nil
	}
	if owner := metav1.GetControllerOf(s); owner == nil || owner.UID != obj.UID {
		return nil
	}
	return r.deleteSecret(ctx, obj.Namespace, name)
}

// secretMeta reads a Secret's metadata only (never its data); nil when it
// does not exist.
func (r *TerraformReconciler) secretMeta(ctx context.Context, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	s := &metav1.PartialObjectMetadata{}
	s.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}
