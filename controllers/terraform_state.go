package controllers

import (
	"time"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/approval"
)

// action is the one thing a reconcile does to a Terraform object.
type action string

const (
	// actionPlan makes a new plan (new inputs, or a drift check).
	actionPlan action = "plan"
	// actionApply applies the stored, approved plan.
	actionApply action = "apply"
	// actionOutputs reads outputs from the state and writes the Secret.
	actionOutputs action = "outputs"
	// actionWait waits for approval of the pending plan.
	actionWait action = "wait"
	// actionNone: everything is up to date until the next drift check.
	actionNone action = "none"
)

// storedPlan is what the controller knows about the last stored plan.
type storedPlan struct {
	ID           string
	InputsDigest string
	Applied      bool
}

// observation is everything decide needs besides the object itself.
type observation struct {
	// inputsDigest covers everything a plan is made from.
	inputsDigest string
	// plan is the stored plan, nil when there is none.
	plan *storedPlan
	// outputsWritten is true when the outputs Secret reflects the state.
	outputsWritten bool
	// now is the current time.
	now time.Time
}

// decision is decide's answer.
type decision struct {
	action action
	// drift is true when the plan is a drift check of applied inputs.
	drift bool
	// destructive is true when the plan waits only because it destroys or
	// replaces resources: approvePlan auto would apply it otherwise.
	destructive bool
	// after is when to look again when action is none.
	after time.Duration
}

// decide picks the next action. It is pure: everything it needs is in obj
// and obs, so that the state machine is tested as a table.
func decide(obj *infrav1.Terraform, obs observation) decision {
	p := obs.plan
	if p == nil || p.InputsDigest != obs.inputsDigest {
		return decision{action: actionPlan}
	}
	if requestedReconcile(obj) {
		// `flux reconcile` / `landform replan`: plan again now, whatever the
		// state. A pending plan with identical changes keeps its id.
		return decision{action: actionPlan, drift: p.Applied}
	}
	if !p.Applied && obj.PendingPlan() != p.ID {
		// Status lost track of the stored plan (a status write failed after
		// the plan was stored): plan again. An identical plan gets the same
		// id, so an approval given for it still holds.
		return decision{action: actionPlan}
	}
	if !p.Applied && !obj.PlansOnly() {
		if approval.Applies(obj, p.ID) {
			return decision{action: actionApply}
		}
		return decision{action: actionWait, destructive: approval.HeldAsDestructive(obj, p.ID), after: obj.GetInterval()}
	}
	if !obs.outputsWritten && p.Applied {
		return decision{action: actionOutputs}
	}
	if obj.Spec.DisableDriftDetection || obj.IsPreview() {
		// A preview plans again for a new source, new inputs or a new
		// state of its target (its inputs include the snapshot), never
		// for drift: it owns no resources.
		return decision{action: actionNone, after: obj.GetInterval()}
	}
	due := driftCheckDue(obj, obs.now)
	if due <= 0 {
		return decision{action: actionPlan, drift: true}
	}
	return decision{action: actionNone, after: due}
}

// approvalMismatch returns the id a user approved when it is not the
// pending plan's, so status can say so.
func approvalMismatch(obj *infrav1.Terraform, pending string) string {
	for _, id := range []string{obj.GetAnnotations()[infrav1.ApproveAnnotation], obj.Spec.ApprovePlan} {
		if id != "" && id != infrav1.ApprovePlanAuto && id != pending {
			return id
		}
	}
	return ""
}

// driftCheckDue is how long until the next drift check; zero or less means now.
func driftCheckDue(obj *infrav1.Terraform, now time.Time) time.Duration {
	if obj.Status.Plan == nil || obj.Status.Plan.PlannedAt == nil {
		return 0
	}
	return obj.Status.Plan.PlannedAt.Add(obj.GetInterval()).Sub(now)
}

// requestedReconcile reports an unhandled reconcile.fluxcd.io/requestedAt.
func requestedReconcile(obj *infrav1.Terraform) bool {
	v, ok := obj.GetAnnotations()[reconcileRequestAnnotation]
	return ok && v != obj.Status.LastHandledReconcileAt
}
