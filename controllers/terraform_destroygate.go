package controllers

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/outcome"
	"github.com/landform-dev/landform/internal/runs"
	"github.com/landform-dev/landform/runner"
)

// gatedDestroy is deletion behind spec.destroyApproval manual: plan the
// destroy, wait until exactly that plan is approved, apply it. It reports
// done once the destroy plan for the current inputs was applied (or had
// nothing to destroy); the deletion then goes on. A destroy plan made from
// other inputs (a new revision, changed variables) is planned again and
// needs its own approval.
func (r *TerraformReconciler) gatedDestroy(ctx context.Context, patcher *objectPatcher, obj *infrav1.Terraform) (bool, error) {
	destroying := obj.DeepCopy()
	destroying.Spec.Destroy = true
	ws, err := r.destroyWorkspace(ctx, destroying)
	if err != nil {
		return false, err
	}
	stored, err := r.storedPlan(ctx, obj)
	if err != nil {
		return false, outcome.Retry(infrav1.DestroyFailedReason, "%v", err)
	}
	if p := obj.Status.Plan; stored != nil && p != nil && p.IsDestroy && p.ID == stored.ID && stored.InputsDigest == ws.inputsDigest {
		if stored.Applied {
			r.report.planEvent(obj, stored.ID, ws.artifact.Revision, corev1.EventTypeNormal, infrav1.DeletingReason, "destroy plan %s applied: deleting the state", stored.ID)
			return true, nil
		}
		if approvedByID(obj, p.Pending) {
			return false, r.startApply(ctx, patcher, obj, ws, nil, nil)
		}
		msg := fmt.Sprintf("deletion waits for the approval of destroy plan %s (%s): annotate with %s=%s (or `landform approve %s`); or set deletionPolicy: Orphan to keep the resources",
			p.Pending, planCounts(p), infrav1.ApproveAnnotation, p.Pending, obj.Name)
		conditions.MarkTrue(obj, infrav1.PlannedCondition, infrav1.PlannedWithChangesReason, "destroy plan %s for revision %s: %s", p.Pending, p.Revision, planCounts(p))
		return false, outcome.WaitingFor(infrav1.PlanPendingReason, obj.GetInterval(), "%s", msg)
	}
	req := runs.Request{
		Run:       infrav1.RunStatus{Action: runPlan, Destroy: true, Revision: ws.artifact.Revision, InputsDigest: ws.inputsDigest, Engine: ws.engine},
		Spec:      runner.RunSpec{Action: runner.RunPlan, Destroy: true, Engine: r.inputs.EngineSpec(ws.engine)},
		Priority:  runs.User,
		Workspace: ws.forRunner(),
		Redactor:  ws.redactor,
	}
	return false, r.startRun(ctx, patcher, obj, req)
}
