package controllers

import (
	"context"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/metrics"
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/planstore"
	"github.com/landform-dev/landform/internal/runlog"
	"github.com/landform-dev/landform/runner"
)

// apply applies the stored plan p and writes the outputs. A stale plan is
// dropped so that the next reconcile plans again and, unless the new plan is
// identical, waits for a new approval.
func (r *TerraformReconciler) apply(ctx context.Context, rn *placement.Run, obj *infrav1.Terraform, ws *workspace, p *planstore.Plan) error {
	logf, endLog := r.startLog(ctx, obj, ws, runlog.PhaseApply)
	outs, err := rn.Client.Apply(ctx, p.PlanFile, logf)
	endLog(err)
	metrics.CountRun("apply", err)
	if rerr, ok := runner.AsError(err); ok && rerr.Reason == runner.ReasonStalePlan {
		if derr := r.Plans.Delete(ctx, obj); derr != nil {
			return retry(infrav1.ApplyFailedReason, "plan %s is stale and could not be dropped: %v", p.ID, derr)
		}
		conditions.MarkFalse(obj, infrav1.AppliedCondition, infrav1.ApplyFailedReason, "plan %s is stale (the state changed since it was made); planning again", p.ID)
		return retry(infrav1.ApplyFailedReason, "plan %s is stale (the state changed since it was made); planning again", p.ID)
	}
	if err != nil {
		ferr := r.runnerFailure(obj, ws, err, infrav1.ApplyFailedReason)
		conditions.MarkFalse(obj, infrav1.AppliedCondition, errorReason(ferr, infrav1.ApplyFailedReason), "applying plan %s: %s", p.ID, ferr.Error())
		r.event(obj, p.Revision, corev1.EventTypeWarning, infrav1.ApplyFailedReason, "applying plan %s failed: %s", p.ID, ferr.Error())
		return ferr
	}
	markUnlocked(obj)
	if err := r.Plans.MarkApplied(ctx, obj, p.ID); err != nil {
		return retry(infrav1.ApplyFailedReason, "recording that plan %s was applied: %v", p.ID, err)
	}
	wasDrift := obj.Status.Plan != nil && obj.Status.Plan.IsDrift
	obj.Status.LastAppliedRevision = p.Revision
	obj.Status.LastAppliedPlan = p.ID
	if obj.Status.Plan != nil {
		obj.Status.Plan.Pending = ""
	}
	conditions.MarkTrue(obj, infrav1.AppliedCondition, infrav1.AppliedReason, "applied plan %s for revision %s", p.ID, p.Revision)
	if wasDrift {
		conditions.MarkFalse(obj, infrav1.DriftedCondition, infrav1.AppliedReason, "drift repaired by plan %s", p.ID)
	}
	// The outputs of this apply have not been written yet.
	conditions.MarkFalse(obj, infrav1.OutputsWrittenCondition, infrav1.ProgressingReason, "writing outputs of plan %s", p.ID)
	r.event(obj, p.Revision, corev1.EventTypeNormal, infrav1.AppliedReason, "applied plan %s", p.ID)
	return r.writeOutputs(ctx, obj, outs)
}

// refreshOutputs reads the outputs from the state and writes them.
func (r *TerraformReconciler) refreshOutputs(ctx context.Context, rn *placement.Run, obj *infrav1.Terraform, ws *workspace) error {
	outs, err := rn.Client.Outputs(ctx)
	metrics.CountRun("outputs", err)
	if err != nil {
		ferr := r.runnerFailure(obj, ws, err, infrav1.OutputsFailedReason)
		conditions.MarkFalse(obj, infrav1.OutputsWrittenCondition, errorReason(ferr, infrav1.OutputsFailedReason), "%s", ferr.Error())
		return ferr
	}
	return r.writeOutputs(ctx, obj, outs)
}
