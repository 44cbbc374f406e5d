// Package approval decides whether a Terraform object's plan may be
// applied, and what approving its pending plan would do. The controller,
// `landform approve` and the web view all ask it: they used to decide
// apart (the CLI from conditions, the web view without approvePlan auto)
// and could disagree on the same object.
package approval

import (
	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// Applies reports whether plan id may be applied now: an approval naming
// it, or approvePlan auto unless the plan is held as destructive. A
// preview's or planOnly object's plans never are (deletion behind
// destroyApproval manual is the controller's own path: see Of).
func Applies(obj *infrav1.Terraform, id string) bool {
	if obj.PlansOnly() || id == "" {
		return false
	}
	return obj.ApprovesPlan(id) || (obj.IsAutoApprove() && !HeldAsDestructive(obj, id))
}

// HeldAsDestructive reports whether approvePlan auto leaves plan id to a
// person because it destroys or replaces resources. Crossplane's contract:
// an external resource is deleted without a person only when its object is
// deleted. spec.autoApproveDestructive lifts the hold, spec.destroy asks
// for exactly that plan, and an approval naming the id is a person's.
// Status summarises the plan (the controller plans again when it does
// not); a plan it does not summarise is held, since nothing says it
// destroys nothing.
func HeldAsDestructive(obj *infrav1.Terraform, id string) bool {
	if !obj.IsAutoApprove() || obj.Spec.AutoApproveDestructive || obj.PlansOnly() || obj.ApprovesPlan(id) {
		return false
	}
	p := obj.Status.Plan
	if p == nil || p.ID != id {
		return true
	}
	return p.Destroy > 0 && !p.IsDestroy
}

// Standing is what approving an object's pending plan would do.
type Standing int

const (
	// NotAppliedPreview: a preview's plans are never applied.
	NotAppliedPreview Standing = iota
	// NotAppliedPlanOnly: spec.planOnly is set (and no destroy plan of a
	// gated deletion waits).
	NotAppliedPlanOnly
	// NoPendingPlan: no plan waits.
	NoPendingPlan
	// Approved: an approval (spec.approvePlan or the annotation) names the
	// pending plan; it is applied next.
	Approved
	// AutoApproved: approvePlan auto applies the pending plan without one.
	AutoApproved
	// NeedsApproval: the pending plan is applied once a person approves it.
	NeedsApproval
)

// Of says where obj's pending plan stands. While obj is deleted behind
// spec.destroyApproval manual, its destroy plan waits for its own
// approval whatever approvePlan and planOnly say.
func Of(obj *infrav1.Terraform) Standing {
	p := obj.Status.Plan
	gatedDestroy := !obj.DeletionTimestamp.IsZero() && obj.IsDestroyGated() && p != nil && p.IsDestroy
	pending := obj.PendingPlan()
	switch {
	case obj.IsPreview():
		return NotAppliedPreview
	case obj.Spec.PlanOnly && !gatedDestroy:
		return NotAppliedPlanOnly
	case pending == "":
		return NoPendingPlan
	case obj.ApprovesPlan(pending):
		return Approved
	case !gatedDestroy && obj.IsAutoApprove() && !HeldAsDestructive(obj, pending):
		return AutoApproved
	}
	return NeedsApproval
}
