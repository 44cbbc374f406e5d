package controllers

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/custody"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/runs"
	"github.com/landform-dev/landform/runner"
)

// reconcileDelete destroys the resources (deletionPolicy Delete) or keeps
// them (Orphan), cleans up what Landform created, and removes the finalizer.
// The destroy is a run like any other: it outlives this reconcile.
func (r *TerraformReconciler) reconcileDelete(ctx context.Context, patcher *objectPatcher, obj *infrav1.Terraform) error {
	if !controllerutil.ContainsFinalizer(obj, infrav1.Finalizer) {
		return nil
	}
	if obj.Spec.Suspend {
		// Not Ready: the object is on its way out and nothing happens
		// until it is resumed.
		return waiting(infrav1.SuspendedReason, obj.GetInterval(), "deletion waits: the object is suspended; set spec.suspend to false to destroy")
	}
	destroyed, err := r.settleRun(ctx, obj)
	if err != nil {
		return err
	}
	owner, err := r.ownsState(ctx, obj)
	if err != nil {
		return err
	}
	// A state an apply could not save goes to the backend before the
	// destroy plans from it, or Orphan keeps it; its Secret would go with
	// the object.
	if owner {
		if err := r.pushUnsaved(ctx, obj); err != nil {
			return err
		}
		verdict, err := r.inTerminatingNamespace(ctx, obj, destroyed)
		if err != nil {
			return err
		}
		// The namespace controller sweeps what is left of the state.
		owner = verdict != letGo
	}
	if owner && obj.GetDeletionPolicy() == infrav1.DeletionPolicyDelete {
		hasState, err := r.hasState(ctx, obj)
		if err != nil {
			return err
		}
		if !destroyed && (hasState || obj.Status.LastAppliedRevision != "") {
			// The destroy fetches the source like any run: the same
			// tenancy rules apply.
			if err := r.checkNamespaces(obj); err != nil {
				return stalling(infrav1.CrossNamespaceRefDeniedReason, "cannot destroy: %v; or set deletionPolicy: Orphan to keep the resources", err)
			}
			if !obj.IsDestroyGated() {
				return r.startDestroy(ctx, patcher, obj)
			}
			if done, err := r.gatedDestroy(ctx, patcher, obj); !done {
				return err
			}
		}
		if err := r.custody.DeleteState(ctx, obj); err != nil {
			return retry(infrav1.DestroyFailedReason, "%v", err)
		}
	}
	if err := r.Plans.Delete(ctx, obj); err != nil {
		return retry(infrav1.DestroyFailedReason, "deleting stored plans: %v", err)
	}
	if err := r.custody.DeleteArtifact(ctx, obj); err != nil {
		return retry(infrav1.DestroyFailedReason, "%v", err)
	}
	if s := obj.Spec.WriteOutputsToSecret; s != nil {
		var err error
		if obj.GetDeletionPolicy() == infrav1.DeletionPolicyDelete {
			err = r.deleteOwnedSecret(ctx, obj, s.Name)
		} else {
			err = r.releaseSecret(ctx, obj, s.Name)
		}
		if err != nil {
			return err
		}
	}
	if err := r.custody.DeleteIdentity(ctx, obj); err != nil {
		return retry(infrav1.DestroyFailedReason, "%v", err)
	}
	// Every state this object guards goes unguarded (Orphan keeps its
	// state; one it stopped using, or left to a person in a namespace
	// being deleted, must not hold that namespace for ever). Only Secrets
	// labelled with its own UID.
	if err := r.custody.Release(ctx, obj); err != nil {
		return retry(infrav1.DestroyFailedReason, "%v", err)
	}
	controllerutil.RemoveFinalizer(obj, infrav1.Finalizer)
	return nil
}

// ownsState reports whether obj owns its state, so that its deletion may
// destroy and delete it: a state another live object owns is neither
// (an event says whose it is and that it stays).
func (r *TerraformReconciler) ownsState(ctx context.Context, obj *infrav1.Terraform) (bool, error) {
	if customBackend(obj) != "" {
		return true, nil
	}
	err := r.custody.Check(ctx, obj)
	var elsewhere *custody.OwnedElsewhereError
	if errors.As(err, &elsewhere) {
		r.event(obj, "", corev1.EventTypeNormal, infrav1.StateOwnedElsewhereReason,
			"deletion destroys nothing and keeps %s %s: it is the state of Terraform %s, not of this object", elsewhere.Kind, elsewhere.Name, elsewhere.Owner)
		return false, nil
	}
	if err != nil {
		return false, retry(infrav1.DestroyFailedReason, "checking who owns the state before deleting it: %v", err)
	}
	return true, nil
}

// settleRun deals with the run in flight when the object is deleted. With
// deletionPolicy Orphan it is interrupted gracefully (terraform saves its
// state and releases its lock) and left; otherwise deletion waits for it
// and collects it. It reports whether the run was a destroy that
// succeeded.
func (r *TerraformReconciler) settleRun(ctx context.Context, obj *infrav1.Terraform) (bool, error) {
	run := obj.Status.Run
	if run == nil {
		return false, nil
	}
	if obj.GetDeletionPolicy() == infrav1.DeletionPolicyOrphan {
		key := client.ObjectKeyFromObject(obj)
		if run.Action == runPlan {
			// A plan writes no state: nothing to wait for.
			r.runs.Abandon(key)
			obj.Status.Run = nil
			r.event(obj, run.Revision, corev1.EventTypeNormal, infrav1.DeletingReason,
				"interrupting %s run %s: deletionPolicy Orphan keeps the resources", run.Action, run.ID)
			return false, nil
		}
		// An apply or destroy is interrupted, then waited for: the state
		// it writes last, or the one it could not save, reaches the
		// backend before the state identity goes (pushUnsaved follows).
		if r.runs.Interrupt(key, run.ID) {
			r.event(obj, run.Revision, corev1.EventTypeNormal, infrav1.DeletingReason,
				"interrupting %s run %s: deletionPolicy Orphan keeps the resources as the run leaves them, once it wrote its state", run.Action, run.ID)
		}
		if c, err := r.inspectRun(ctx, obj); c == nil {
			return false, err
		}
		// Collected, however it ended: the resources stay as it left them.
		return false, nil
	}
	c, err := r.inspectRun(ctx, obj)
	if err != nil {
		return false, err
	}
	c.idle.Stop()
	return c.destroyed, nil
}

// destroyWorkspace prepares the workspace a destroy (or a destroy plan)
// runs in, from the source or, when it is gone, the kept artifact.
func (r *TerraformReconciler) destroyWorkspace(ctx context.Context, obj *infrav1.Terraform) (*workspace, error) {
	ws, err := r.prepareWorkspace(ctx, obj)
	switch o := outcomeOf(err, infrav1.DestroyFailedReason); {
	case o.kind == stalled:
		// Retrying cannot help (a bad path, a source gone with nothing
		// kept): Stalled, and a fixed spec or a source back brings it here.
		return nil, stalling(o.reason, "cannot destroy: %v; or set deletionPolicy: Orphan (or remove the finalizer %s) to let the object go and keep the resources", err, infrav1.Finalizer)
	case err != nil:
		return nil, retry(infrav1.DestroyFailedReason, "cannot destroy: %v (or set deletionPolicy: Orphan to keep the resources)", err)
	}
	return ws, nil
}

// startDestroy starts the destroy run, with the current source and vars;
// when the source is gone, with the artifact last applied, as kept.
func (r *TerraformReconciler) startDestroy(ctx context.Context, patcher *objectPatcher, obj *infrav1.Terraform) error {
	ws, err := r.destroyWorkspace(ctx, obj)
	if err != nil {
		return err
	}
	if err := r.custody.KeepVersion(ctx, obj, "destroy", ws.artifact.Revision); err != nil {
		return retry(infrav1.ApplyFailedReason, "keeping the current state before the destroy: %v", err)
	}
	req := runs.Request{
		Run:       infrav1.RunStatus{Action: runDestroy, Revision: ws.artifact.Revision, InputsDigest: ws.inputsDigest, Engine: ws.engine},
		Spec:      runner.RunSpec{Action: runner.RunDestroy, Engine: r.engineSpec(ws.engine)},
		Priority:  runs.User,
		Workspace: ws.forRunner(),
		Redactor:  ws.redactor,
	}
	return r.startRun(ctx, patcher, obj, req)
}

// hasState reports whether the default backend's state Secret holds a
// state: the controller creates it empty for the state identity.
func (r *TerraformReconciler) hasState(ctx context.Context, obj *infrav1.Terraform) (bool, error) {
	if customBackend(obj) != "" {
		return obj.Status.LastAppliedRevision != "", nil
	}
	var s corev1.Secret
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: names.StateSecret(obj)}, &s)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("checking for state Secret %s: %w", names.StateSecret(obj), err)
	}
	return len(s.Data["tfstate"]) > 0, nil
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

// releaseSecret drops obj's ownership of the outputs Secret, so that the
// garbage collector keeps it (deletionPolicy Orphan): the workloads that
// mount it go on.
func (r *TerraformReconciler) releaseSecret(ctx context.Context, obj *infrav1.Terraform, name string) error {
	secret := &corev1.Secret{}
	err := r.Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: name}, secret)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return retry(infrav1.DestroyFailedReason, "reading outputs Secret %s: %v", name, err)
	}
	before := secret.DeepCopy()
	var kept []metav1.OwnerReference
	for _, ref := range secret.OwnerReferences {
		if ref.UID != obj.UID {
			kept = append(kept, ref)
		}
	}
	if len(kept) == len(secret.OwnerReferences) {
		return nil
	}
	secret.OwnerReferences = kept
	if err := r.Patch(ctx, secret, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return retry(infrav1.DestroyFailedReason, "keeping outputs Secret %s (deletionPolicy Orphan): %v", name, err)
	}
	return nil
}
