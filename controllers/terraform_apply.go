package controllers

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/planstore"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// recordApply records that the run applied plan id and writes the outputs
// it reported.
func (r *TerraformReconciler) recordApply(ctx context.Context, obj *infrav1.Terraform, run *infrav1.RunStatus, outs []*runnerpb.Output) error {
	id := run.Plan
	markUnlocked(obj)
	if err := r.Plans.MarkApplied(ctx, obj, id); err != nil {
		return retry(infrav1.ApplyFailedReason, "recording that plan %s was applied: %v", id, err)
	}
	wasDrift := obj.Status.Plan != nil && obj.Status.Plan.IsDrift
	obj.Status.LastAppliedRevision = run.Revision
	obj.Status.LastAppliedPlan = id
	if obj.Status.Plan != nil && obj.Status.Plan.Pending == id {
		obj.Status.Plan.Pending = ""
	}
	conditions.MarkTrue(obj, infrav1.AppliedCondition, infrav1.AppliedReason, "applied plan %s for revision %s", id, run.Revision)
	if wasDrift {
		conditions.MarkFalse(obj, infrav1.DriftedCondition, infrav1.AppliedReason, "drift repaired by plan %s", id)
	}
	// The outputs of this apply have not been written yet.
	conditions.MarkFalse(obj, infrav1.OutputsWrittenCondition, infrav1.ProgressingReason, "writing outputs of plan %s", id)
	r.planEvent(obj, id, run.Revision, corev1.EventTypeNormal, infrav1.AppliedReason, "applied plan %s", id)
	return r.writeOutputs(ctx, obj, outs)
}

// dropPlan forgets the stored plan, so that the next reconcile plans again
// from the current state. A new plan identical to the dropped one gets its
// id back, and with it any approval given for it.
func (r *TerraformReconciler) dropPlan(ctx context.Context, obj *infrav1.Terraform) error {
	if err := r.Plans.Delete(ctx, obj); err != nil {
		return retry(infrav1.PlanUnusableReason, "dropping the stored plan: %v", err)
	}
	if obj.Status.Plan != nil {
		obj.Status.Plan.Pending = ""
	}
	return nil
}

// verifyPlan refuses to apply a stored plan whose bytes are not those the
// controller stored: status.plan.digest, which runners cannot write, names
// them. A plan changed after it was made is dropped, never applied; the
// module is planned again after the retry interval.
func (r *TerraformReconciler) verifyPlan(ctx context.Context, obj *infrav1.Terraform, ws *workspace, p *planstore.Plan) error {
	var want, pending string
	if obj.Status.Plan != nil {
		want, pending = obj.Status.Plan.Digest, obj.Status.Plan.Pending
	}
	var why string
	switch {
	case p.ID != pending:
		why = fmt.Sprintf("the stored plan is %s, but the plan this controller made and is waiting to apply is %s", p.ID, pending)
	case want == "":
		why = "no digest was recorded for it when it was stored (a plan stored by an older controller)"
	case p.Digest != want:
		why = fmt.Sprintf("its stored bytes (%s) are not those stored when it was made (%s)", p.Digest, want)
	default:
		return nil
	}
	if err := r.dropPlan(ctx, obj); err != nil {
		return err
	}
	msg := fmt.Sprintf("plan %s was not applied: %s; the stored plan was changed after it was made, so it was dropped, and the module will be planned again", p.ID, why)
	conditions.MarkFalse(obj, infrav1.AppliedCondition, infrav1.PlanDigestMismatchReason, "%s", msg)
	r.event(obj, ws.artifact.Revision, corev1.EventTypeWarning, infrav1.PlanDigestMismatchReason, "%s", msg)
	return retry(infrav1.PlanDigestMismatchReason, "%s", msg)
}
