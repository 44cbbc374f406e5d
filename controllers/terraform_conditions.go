package controllers

import (
	"fmt"
	"strings"

	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/approval"
)

// readyMessage says what a Ready object has done last.
func readyMessage(obj *infrav1.Terraform) string {
	switch {
	case obj.IsPreview() && obj.Status.Plan != nil:
		return fmt.Sprintf("preview plan %s made (%s; a preview is never applied)", obj.Status.Plan.ID, planCounts(obj.Status.Plan))
	case obj.PlansOnly() && obj.PendingPlan() != "":
		return fmt.Sprintf("plan %s made (planOnly: not applied)", obj.PendingPlan())
	case obj.Status.LastAppliedRevision != "":
		return fmt.Sprintf("applied revision %s", obj.Status.LastAppliedRevision)
	default:
		return "no changes"
	}
}

// pendingMessage says which plan waits and how to approve it.
func pendingMessage(obj *infrav1.Terraform) string {
	p := obj.Status.Plan
	if p == nil {
		return "waiting for a plan"
	}
	msg := fmt.Sprintf("plan %s (%s) waits for approval: annotate with %s=%s or set spec.approvePlan",
		p.Pending, planCounts(p), infrav1.ApproveAnnotation, p.Pending)
	if approval.HeldAsDestructive(obj, p.Pending) {
		msg = fmt.Sprintf("plan %s (%s) %s; approvePlan auto applies no such plan without a person, so it waits for approval: annotate with %s=%s or set spec.approvePlan to its id (spec.autoApproveDestructive: true applies such plans automatically)",
			p.Pending, planCounts(p), destructiveChanges(p), infrav1.ApproveAnnotation, p.Pending)
	}
	switch {
	case obj.IsPreview():
		msg = fmt.Sprintf("preview plan %s (%s) made; a preview is never applied", p.Pending, planCounts(p))
	case obj.PlansOnly():
		msg = fmt.Sprintf("plan %s (%s) made; spec.planOnly keeps it from being applied", p.Pending, planCounts(p))
	}
	if other := approvalMismatch(obj, p.Pending); other != "" {
		msg = fmt.Sprintf("approval %q does not match the pending plan; %s", other, msg)
	}
	return msg
}

// pendingEventMessage is the PlanPending event's message: pendingMessage,
// or for a destroy plan (deletion behind destroyApproval: manual) what
// approving it does.
func pendingEventMessage(obj *infrav1.Terraform) string {
	if p := obj.Status.Plan; p != nil && p.IsDestroy {
		return fmt.Sprintf("destroy plan %s (%s) waits for approval: annotate with %s=%s to destroy the resources",
			p.Pending, planCounts(p), infrav1.ApproveAnnotation, p.Pending)
	}
	return pendingMessage(obj)
}

// messageResources bounds the addresses a message names; status names up
// to maxStatusResources, the stored plan all of them.
const messageResources = 10

// destructiveChanges says what a plan destroys: "replaces a.b and destroys
// c.d", addresses only.
func destructiveChanges(p *infrav1.PlanStatus) string {
	var parts []string
	if len(p.ResourcesToReplace) > 0 {
		parts = append(parts, "replaces "+strings.Join(capList(p.ResourcesToReplace, messageResources), ", "))
	}
	if len(p.ResourcesToDestroy) > 0 {
		parts = append(parts, "destroys "+strings.Join(capList(p.ResourcesToDestroy, messageResources), ", "))
	}
	if len(parts) == 0 {
		// Summarised by a runner that does not name them.
		return fmt.Sprintf("destroys or replaces %d resource(s)", p.Destroy)
	}
	return strings.Join(parts, " and ")
}

// planCounts is the short summary "+1 ~2 -0", and ", 1 to import" when
// the plan imports.
func planCounts(p *infrav1.PlanStatus) string {
	if p.Import > 0 {
		return fmt.Sprintf("+%d ~%d -%d, %d to import", p.Add, p.Change, p.Destroy, p.Import)
	}
	return fmt.Sprintf("+%d ~%d -%d", p.Add, p.Change, p.Destroy)
}

// markApprovalMismatch tells the user when an approval names another plan
// and the pending one waits. An approval left from an earlier plan (say of
// a destructive one under approvePlan auto) says nothing about a plan that
// is applied anyway.
func markApprovalMismatch(obj *infrav1.Terraform) {
	pending := obj.PendingPlan()
	if pending == "" || approval.Applies(obj, pending) {
		return
	}
	switch other := approvalMismatch(obj, pending); {
	case other == "":
	case other == obj.Status.LastFailedApplyPlan:
		conditions.MarkTrue(obj, infrav1.PlannedCondition, infrav1.ApprovalMismatchReason,
			"approval %q was used by an apply that failed or was lost, which may have changed resources; pending plan %s (%s) needs its own approval; nothing was applied",
			other, pending, planCounts(obj.Status.Plan))
	default:
		conditions.MarkTrue(obj, infrav1.PlannedCondition, infrav1.ApprovalMismatchReason,
			"approval %q does not match pending plan %s (%s); nothing was applied", other, pending, planCounts(obj.Status.Plan))
	}
}

// outputsUpToDate reports whether outputs were written for this generation
// after the last apply (an apply resets the condition).
func outputsUpToDate(obj *infrav1.Terraform) bool {
	c := conditions.Get(obj, infrav1.OutputsWrittenCondition)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == obj.Generation
}
