package controllers

import (
	"context"
	"errors"
	"fmt"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/outcome"
	"github.com/landform-dev/landform/internal/planstore"
	"github.com/landform-dev/landform/internal/runs"
	"github.com/landform-dev/landform/internal/stateguard"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// recordApply records that the run applied plan id and writes the outputs
// it reported. status.lastAppliedPlan is the record that the plan was
// applied (planstore reads the stored plan as applied by it).
func (r *TerraformReconciler) recordApply(ctx context.Context, obj *infrav1.Terraform, run *infrav1.RunStatus, outs []*runnerpb.Output) error {
	id := run.Plan
	stateguard.MarkUnlocked(obj)
	wasDrift := obj.Status.Plan != nil && obj.Status.Plan.IsDrift
	obj.Status.LastAppliedRevision = run.Revision
	obj.Status.LastAppliedPlan = id
	obj.Status.LastFailedApplyPlan = ""
	if obj.Status.Plan != nil && obj.Status.Plan.Pending == id {
		obj.Status.Plan.Pending = ""
	}
	conditions.MarkTrue(obj, infrav1.AppliedCondition, infrav1.AppliedReason, "applied plan %s for revision %s", id, run.Revision)
	if p := obj.Status.Plan; p != nil && p.ID == id {
		// Planned said why the plan waited (DestructivePlanPending, an
		// ApprovalMismatch since mended): it waits no more.
		conditions.MarkTrue(obj, infrav1.PlannedCondition, infrav1.PlannedWithChangesReason, "plan %s for revision %s: %s", id, p.Revision, planCounts(p))
	}
	if wasDrift {
		conditions.MarkFalse(obj, infrav1.DriftedCondition, infrav1.AppliedReason, "drift repaired by plan %s", id)
	}
	// The outputs of this apply have not been written yet.
	conditions.MarkFalse(obj, infrav1.OutputsWrittenCondition, infrav1.ProgressingReason, "writing outputs of plan %s", id)
	err := r.writeOutputs(ctx, obj, outs)
	// One event tells the apply: the plan, its counts, and the outputs it
	// wrote (a failure to write them has its own Warning).
	msg := "applied plan " + id
	if p := obj.Status.Plan; p != nil && p.ID == id {
		msg += ": " + planCounts(p)
	}
	if err == nil && obj.Spec.WriteOutputsToSecret != nil {
		msg += "; " + conditions.GetMessage(obj, infrav1.OutputsWrittenCondition)
	}
	r.report.PlanEvent(obj, id, run.Revision, corev1.EventTypeNormal, infrav1.AppliedReason, "%s", msg)
	return err
}

// dropPlan forgets the stored plan, so that the next reconcile plans again
// from the current state. A new plan identical to the dropped one gets its
// id back, and with it any approval given for it.
func (r *TerraformReconciler) dropPlan(ctx context.Context, obj *infrav1.Terraform) error {
	if err := r.Plans.Delete(ctx, obj); err != nil {
		return outcome.Retry(infrav1.PlanUnusableReason, "dropping the stored plan: %v", err)
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
	r.report.Event(obj, ws.artifact.Revision, corev1.EventTypeWarning, infrav1.PlanDigestMismatchReason, "%s", msg)
	return outcome.Retry(infrav1.PlanDigestMismatchReason, "%s", msg)
}

// planEngine is the engine version that made plan id, as status records
// it; nil when spec.engine chose none.
func planEngine(obj *infrav1.Terraform, id string) *infrav1.EngineStatus {
	if p := obj.Status.Plan; p != nil && p.ID == id && p.Engine != nil {
		return p.Engine.DeepCopy()
	}
	return nil
}

// startApply starts the apply of the stored, approved plan, on the runner
// that made it when it is still at hand. A stored plan that cannot be read
// back intact is dropped, and the module planned again. just is the plan
// this reconcile stored, if any: it needs no reading back.
func (r *TerraformReconciler) startApply(ctx context.Context, patcher *objectPatcher, obj *infrav1.Terraform, ws *workspace, idle *runs.Idle, just *planstore.Plan) (outcome.Outcome, error) {
	if just != nil && just.ID == obj.PendingPlan() {
		return r.applyPlan(ctx, patcher, obj, ws, idle, just)
	}
	p, err := r.Plans.Load(ctx, obj)
	if errors.Is(err, planstore.ErrNotFound) {
		// Told before dropPlan forgets which plan it was.
		msg := fmt.Sprintf("stored plan %s cannot be read back intact (%v); planning again", obj.PendingPlan(), err)
		if derr := r.dropPlan(ctx, obj); derr != nil {
			return outcome.Outcome{}, derr
		}
		conditions.MarkFalse(obj, infrav1.AppliedCondition, infrav1.PlanUnusableReason, "%s", msg)
		r.report.Event(obj, ws.artifact.Revision, corev1.EventTypeWarning, infrav1.PlanUnusableReason, "%s", msg)
		return outcome.Outcome{}, outcome.WaitingFor(infrav1.PlanUnusableReason, outcome.ReplanSoon, "%s", msg)
	}
	if err != nil {
		return outcome.Outcome{}, outcome.Retry(infrav1.ApplyFailedReason, "loading plan %s: %v", obj.PendingPlan(), err)
	}
	return r.applyPlan(ctx, patcher, obj, ws, idle, p)
}

// applyPlan starts the apply of p once its bytes are those recorded when
// it was made.
func (r *TerraformReconciler) applyPlan(ctx context.Context, patcher *objectPatcher, obj *infrav1.Terraform, ws *workspace, idle *runs.Idle, p *planstore.Plan) (outcome.Outcome, error) {
	if err := r.verifyPlan(ctx, obj, ws, p); err != nil {
		return outcome.Outcome{}, err
	}
	// Without the copy the apply does not start: nothing is written that
	// could not be rolled back.
	if err := r.Custody.KeepVersion(ctx, obj, "apply of plan "+p.ID, p.Revision); err != nil {
		return outcome.Outcome{}, outcome.Retry(infrav1.ApplyFailedReason, "keeping the current state before the apply of plan %s: %v", p.ID, err)
	}
	return r.startRun(ctx, patcher, obj, ws, applyRun{plan: p, idle: idle})
}

// metaOf is the metadata of a plan at hand; nil for none.
func metaOf(p *planstore.Plan) *storedPlan {
	if p == nil {
		return nil
	}
	return &storedPlan{ID: p.ID, InputsDigest: p.InputsDigest, Applied: p.Applied}
}

// storedPlan reads the stored plan's metadata; nil when there is none.
func (r *TerraformReconciler) storedPlan(ctx context.Context, obj *infrav1.Terraform) (*storedPlan, error) {
	p, err := r.Plans.LoadMeta(ctx, obj)
	if errors.Is(err, planstore.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the stored plan: %w", err)
	}
	return metaOf(p), nil
}
