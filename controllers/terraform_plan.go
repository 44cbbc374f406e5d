package controllers

import (
	"context"
	"fmt"
	"strings"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/approval"
	"github.com/landform-dev/landform/internal/outcome"
	"github.com/landform-dev/landform/internal/planstore"
	"github.com/landform-dev/landform/internal/redact"
	"github.com/landform-dev/landform/internal/stateguard"
	"github.com/landform-dev/landform/runner"
)

// maxStatusResources bounds the addresses listed in status; the stored plan
// has them all.
const maxStatusResources = 50

// recordPlan stores the plan a run made and records its summary in status.
// A plan without changes is stored as applied: there is nothing to approve.
// The human plan, which `landform plan show` prints, is stored redacted.
func (r *TerraformReconciler) recordPlan(ctx context.Context, obj *infrav1.Terraform, run *infrav1.RunStatus, out *runner.PlanOutput, redactor *redact.Redactor) (*planstore.Plan, error) {
	drift := run.Drift
	stateguard.MarkUnlocked(obj)
	res := out.Result
	rev := run.Revision
	p := &planstore.Plan{
		ID: planID(rev, planMaterial{
			inputsDigest:  run.InputsDigest,
			engine:        res.Engine,
			lockFile:      out.LockFile,
			stateDigest:   res.StateDigest,
			changesDigest: res.ChangesDigest,
			applied:       obj.Status.LastAppliedPlan,
			failed:        obj.Status.LastFailedApplyPlan,
		}),
		Revision:     rev,
		InputsDigest: run.InputsDigest,
		PlanFile:     out.PlanFile,
		JSONPlan:     out.JSONPlan,
		HumanPlan:    []byte(redactor.String(string(out.HumanPlan))),
		LockFile:     out.LockFile,
		Applied:      !res.HasChanges,
	}
	if err := r.Plans.Save(ctx, obj, p); err != nil {
		return nil, outcome.Retry(infrav1.PlanFailedReason, "storing plan %s: %v", p.ID, err)
	}

	now := metav1.NewTime(r.now())
	status := &infrav1.PlanStatus{
		ID:                 p.ID,
		Revision:           rev,
		Digest:             p.Digest,
		Add:                res.Add,
		Change:             res.Change,
		Destroy:            res.Destroy,
		Replace:            int32(len(res.ResourcesToReplace)),
		Resources:          capList(res.Resources, maxStatusResources),
		ResourcesToReplace: capList(res.ResourcesToReplace, maxStatusResources),
		ResourcesToDestroy: capList(res.ResourcesToDestroy, maxStatusResources),
		Import:             res.ImportCount,
		Engine:             run.Engine.DeepCopy(),
		ResourcesToImport:  capList(res.ResourcesToImport, maxStatusResources),
		IsDestroy:          obj.Spec.Destroy || run.Destroy,
		IsDrift:            drift && res.HasChanges,
		PlannedAt:          &now,
	}
	if res.HasChanges {
		status.Pending = p.ID
	} else if !obj.IsPreview() {
		// Nothing to apply: this revision is what is in effect. (Not
		// for a preview: nothing of it is ever in effect.)
		obj.Status.LastAppliedRevision = rev
	}
	obj.Status.Plan = status
	obj.Status.LastPlannedRevision = rev

	summary := fmt.Sprintf("plan %s for revision %s: %s", p.ID, rev, planCounts(status))
	// Deletion's plans are destroyApproval's to gate.
	held := res.HasChanges && obj.DeletionTimestamp.IsZero() && approval.HeldAsDestructive(obj, p.ID)
	switch {
	case held:
		conditions.MarkTrue(obj, infrav1.PlannedCondition, infrav1.DestructivePlanPendingReason,
			"%s; it %s and waits for approval (approvePlan auto applies nothing destructive)", summary, destructiveChanges(status))
	case res.HasChanges:
		conditions.MarkTrue(obj, infrav1.PlannedCondition, infrav1.PlannedWithChangesReason, "%s", summary)
	default:
		conditions.MarkTrue(obj, infrav1.PlannedCondition, infrav1.PlannedNoChangesReason, "%s (no changes)", summary)
	}
	switch {
	case status.IsDrift:
		conditions.MarkTrue(obj, infrav1.DriftedCondition, infrav1.DriftDetectedReason,
			"drift detected: %s in %s", planCounts(status), strings.Join(status.Resources, ", "))
		r.report.PlanEvent(obj, p.ID, rev, corev1.EventTypeWarning, infrav1.DriftDetectedReason, "drift detected by plan %s: %s", p.ID, planCounts(status))
	case drift:
		conditions.MarkFalse(obj, infrav1.DriftedCondition, infrav1.NoDriftReason, "no drift at %s", now.UTC().Format("2006-01-02T15:04:05Z"))
	}
	switch {
	case obj.IsPreview():
		// One event tells a preview's plan, as a pull request shows it:
		// a comment provider keeps the last event it was sent.
		r.report.planPreview(obj, p)
		return p, nil
	case res.HasChanges && !held && !awaitsApproval(obj, p.ID) && !obj.PlansOnly():
		// Applied at once: its Applied event tells the plan, its counts
		// and what the apply wrote, one event instead of three.
	case res.HasChanges:
		r.report.PlanEvent(obj, p.ID, rev, corev1.EventTypeNormal, infrav1.PlannedWithChangesReason, "%s", summary)
	default:
		r.report.PlanEvent(obj, p.ID, rev, corev1.EventTypeNormal, infrav1.PlannedNoChangesReason, "%s (no changes)", summary)
	}
	switch {
	case held:
		// A Warning: left alone, it would have destroyed something.
		r.report.PlanEvent(obj, p.ID, rev, corev1.EventTypeWarning, infrav1.DestructivePlanPendingReason, "%s", pendingMessage(obj))
	case res.HasChanges && awaitsApproval(obj, p.ID):
		// The one event an approver needs: a plan waits for them.
		r.report.PlanEvent(obj, p.ID, rev, corev1.EventTypeNormal, infrav1.PlanPendingReason, "%s", pendingEventMessage(obj))
	}
	return p, nil
}

// awaitsApproval reports whether plan id, just made, waits for a person.
func awaitsApproval(obj *infrav1.Terraform, id string) bool {
	if !obj.DeletionTimestamp.IsZero() {
		// Deletion's destroy plan (destroyApproval: manual): only an
		// approval naming it applies it.
		return !obj.ApprovesPlan(id)
	}
	return !approval.Applies(obj, id)
}

func capList(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(append([]string{}, s[:n]...), fmt.Sprintf("... and %d more", len(s)-n))
}
