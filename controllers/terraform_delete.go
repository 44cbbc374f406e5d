package controllers

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/outcome"
	"github.com/landform-dev/landform/internal/outputs"
	"github.com/landform-dev/landform/internal/runs"
	"github.com/landform-dev/landform/internal/stateguard"
	"github.com/landform-dev/landform/runner"
)

// reconcileDelete destroys the resources (deletionPolicy Delete) or keeps
// them (Orphan), cleans up what Landform created, and removes the finalizer.
// The destroy is a run like any other: it outlives this reconcile.
func (r *TerraformReconciler) reconcileDelete(ctx context.Context, patcher *objectPatcher, obj *infrav1.Terraform) (outcome.Outcome, error) {
	if !controllerutil.ContainsFinalizer(obj, infrav1.Finalizer) {
		return outcome.Done(0), nil
	}
	if obj.Spec.Suspend {
		// Not Ready: the object is on its way out and nothing happens
		// until it is resumed.
		return outcome.Outcome{}, outcome.WaitingFor(infrav1.SuspendedReason, obj.GetInterval(), "deletion waits: the object is suspended; set spec.suspend to false to destroy")
	}
	c, err := r.settleRun(ctx, obj)
	if err != nil {
		return outcome.Outcome{}, err
	}
	if c.running != nil {
		return *c.running, nil
	}
	destroyed := c.destroyed
	owner, err := r.state.Owns(ctx, obj)
	if err != nil {
		return outcome.Outcome{}, err
	}
	// A state an apply could not save goes to the backend before the
	// destroy plans from it, or Orphan keeps it; its Secret would go with
	// the object.
	if owner {
		if err := r.state.PushUnsaved(ctx, obj); err != nil {
			return outcome.Outcome{}, err
		}
		verdict, err := r.state.InTerminatingNamespace(ctx, obj, destroyed)
		if err != nil {
			return outcome.Outcome{}, err
		}
		// The namespace controller sweeps what is left of the state.
		owner = verdict != stateguard.LetGo
	}
	if owner && obj.IsPreview() {
		// A preview's state is its snapshot, Landform's copy: it goes
		// with the preview (nothing is destroyed: the deletion policy of
		// a preview is Orphan).
		if err := r.Custody.DeleteState(ctx, obj); err != nil {
			return outcome.Outcome{}, outcome.Retry(infrav1.DeletingReason, "%v", err)
		}
	}
	if owner && obj.GetDeletionPolicy() == infrav1.DeletionPolicyDelete {
		holdsResources, err := r.Custody.HoldsResources(ctx, obj)
		if err != nil {
			return outcome.Outcome{}, err
		}
		if !destroyed && (holdsResources || obj.Status.LastAppliedRevision != "") {
			// The destroy fetches the source like any run: the same
			// tenancy rules apply.
			if err := r.inputs.CheckNamespaces(obj); err != nil {
				return outcome.Outcome{}, outcome.Stalling(infrav1.CrossNamespaceRefDeniedReason, "cannot destroy: %v; or set deletionPolicy: Orphan to keep the resources", err)
			}
			if !obj.IsDestroyGated() {
				return r.startDestroy(ctx, patcher, obj)
			}
			if done, o, err := r.gatedDestroy(ctx, patcher, obj); !done {
				return o, err
			}
		}
		if err := r.Custody.DeleteState(ctx, obj); err != nil {
			return outcome.Outcome{}, outcome.Retry(infrav1.DestroyFailedReason, "%v", err)
		}
	}
	if err := r.Plans.Delete(ctx, obj); err != nil {
		return outcome.Outcome{}, outcome.Retry(infrav1.DestroyFailedReason, "deleting stored plans: %v", err)
	}
	if err := r.Custody.DeleteArtifact(ctx, obj); err != nil {
		return outcome.Outcome{}, outcome.Retry(infrav1.DestroyFailedReason, "%v", err)
	}
	if s := obj.Spec.WriteOutputsToSecret; s != nil {
		if err := outputs.End(ctx, r.Client, r.APIReader, obj, s.Name); err != nil {
			return outcome.Outcome{}, outcome.Retry(infrav1.DestroyFailedReason, "%v", err)
		}
	}
	if err := r.Custody.DeleteIdentity(ctx, obj); err != nil {
		return outcome.Outcome{}, outcome.Retry(infrav1.DestroyFailedReason, "%v", err)
	}
	// Every state this object guards goes unguarded (Orphan keeps its
	// state; one it stopped using, or left to a person in a namespace
	// being deleted, must not hold that namespace for ever). Only Secrets
	// labelled with its own UID.
	if err := r.Custody.Release(ctx, obj); err != nil {
		return outcome.Outcome{}, outcome.Retry(infrav1.DestroyFailedReason, "%v", err)
	}
	controllerutil.RemoveFinalizer(obj, infrav1.Finalizer)
	return outcome.Done(0), nil
}

// settleRun deals with the run in flight when the object is deleted. With
// deletionPolicy Orphan it is interrupted gracefully (terraform saves its
// state and releases its lock) and left; otherwise deletion waits for it
// and collects it. What it learnt tells whether the run goes on, or was a
// destroy that succeeded.
func (r *TerraformReconciler) settleRun(ctx context.Context, obj *infrav1.Terraform) (*collected, error) {
	run := obj.Status.Run
	if run == nil {
		return &collected{}, nil
	}
	if obj.GetDeletionPolicy() == infrav1.DeletionPolicyOrphan {
		key := client.ObjectKeyFromObject(obj)
		if runner.Action(run.Action) == runner.Plan {
			// A plan writes no state: nothing to wait for.
			r.Runs.Abandon(key)
			obj.Status.Run = nil
			r.report.Event(obj, run.Revision, corev1.EventTypeNormal, infrav1.DeletingReason,
				"interrupting %s run %s: deletionPolicy Orphan keeps the resources", run.Action, run.ID)
			return &collected{}, nil
		}
		// An apply or destroy is interrupted, then waited for: the state
		// it writes last, or the one it could not save, reaches the
		// backend before the state identity goes (pushUnsaved follows).
		if r.Runs.Interrupt(key, run.ID) {
			r.report.Event(obj, run.Revision, corev1.EventTypeNormal, infrav1.DeletingReason,
				"interrupting %s run %s: deletionPolicy Orphan keeps the resources as the run leaves them, once it wrote its state", run.Action, run.ID)
		}
		c, err := r.inspectRun(ctx, obj)
		if c == nil || c.running != nil {
			return c, err
		}
		// Collected, however it ended: the resources stay as it left them.
		return &collected{}, nil
	}
	c, err := r.inspectRun(ctx, obj)
	if err != nil {
		return nil, err
	}
	c.idle.Stop()
	return c, nil
}

// destroyWorkspace prepares the workspace a destroy (or a destroy plan)
// runs in, from the source or, when it is gone, the kept artifact.
func (r *TerraformReconciler) destroyWorkspace(ctx context.Context, obj *infrav1.Terraform) (*workspace, error) {
	ws, err := r.prepareWorkspace(ctx, obj)
	switch o := outcome.Of(err, infrav1.DestroyFailedReason); {
	case o.Kind == outcome.Stalled:
		// Retrying cannot help (a bad path, a source gone with nothing
		// kept): Stalled, and a fixed spec or a source back brings it here.
		return nil, outcome.Stalling(o.Reason, "cannot destroy: %v; or set deletionPolicy: Orphan (or remove the finalizer %s) to let the object go and keep the resources", err, infrav1.Finalizer)
	case err != nil:
		return nil, outcome.Retry(infrav1.DestroyFailedReason, "cannot destroy: %v (or set deletionPolicy: Orphan to keep the resources)", err)
	}
	return ws, nil
}

// startDestroy starts the destroy run, with the current source and vars;
// when the source is gone, with the artifact last applied, as kept.
func (r *TerraformReconciler) startDestroy(ctx context.Context, patcher *objectPatcher, obj *infrav1.Terraform) (outcome.Outcome, error) {
	ws, err := r.destroyWorkspace(ctx, obj)
	if err != nil {
		return outcome.Outcome{}, err
	}
	if err := r.Custody.KeepVersion(ctx, obj, "destroy", ws.artifact.Revision); err != nil {
		return outcome.Outcome{}, outcome.Retry(infrav1.ApplyFailedReason, "keeping the current state before the destroy: %v", err)
	}
	return r.startRun(ctx, patcher, obj, ws, destroyRun{})
}

// gatedDestroy is deletion behind spec.destroyApproval manual: plan the
// destroy, wait until exactly that plan is approved, apply it. It reports
// done once the destroy plan for the current inputs was applied (or had
// nothing to destroy); the deletion then goes on. A destroy plan made from
// other inputs (a new revision, changed variables) is planned again and
// needs its own approval. Until done, it returns how the reconcile ends.
func (r *TerraformReconciler) gatedDestroy(ctx context.Context, patcher *objectPatcher, obj *infrav1.Terraform) (done bool, ended outcome.Outcome, err error) {
	destroying := obj.DeepCopy()
	destroying.Spec.Destroy = true
	ws, err := r.destroyWorkspace(ctx, destroying)
	if err != nil {
		return false, outcome.Outcome{}, err
	}
	stored, err := r.storedPlan(ctx, obj)
	if err != nil {
		return false, outcome.Outcome{}, outcome.Retry(infrav1.DestroyFailedReason, "%v", err)
	}
	if p := obj.Status.Plan; stored != nil && p != nil && p.IsDestroy && p.ID == stored.ID && stored.InputsDigest == ws.inputsDigest {
		if stored.Applied {
			r.report.PlanEvent(obj, stored.ID, ws.artifact.Revision, corev1.EventTypeNormal, infrav1.DeletingReason, "destroy plan %s applied: deleting the state", stored.ID)
			return true, outcome.Outcome{}, nil
		}
		if obj.ApprovesPlan(p.Pending) {
			ended, err = r.startApply(ctx, patcher, obj, ws, nil, nil)
			return false, ended, err
		}
		msg := fmt.Sprintf("deletion waits for the approval of destroy plan %s (%s): annotate with %s=%s (or `landform approve %s`); or set deletionPolicy: Orphan to keep the resources",
			p.Pending, planCounts(p), infrav1.ApproveAnnotation, p.Pending, obj.Name)
		conditions.MarkTrue(obj, infrav1.PlannedCondition, infrav1.PlannedWithChangesReason, "destroy plan %s for revision %s: %s", p.Pending, p.Revision, planCounts(p))
		return false, outcome.Outcome{}, outcome.WaitingFor(infrav1.PlanPendingReason, obj.GetInterval(), "%s", msg)
	}
	ended, err = r.startRun(ctx, patcher, obj, ws, planRun{destroy: true, priority: runs.User})
	return false, ended, err
}
