package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/metrics"
	"github.com/landform-dev/landform/internal/outcome"
	"github.com/landform-dev/landform/internal/planstore"
	"github.com/landform-dev/landform/internal/runs"
	"github.com/landform-dev/landform/internal/stateguard"
	"github.com/landform-dev/landform/internal/unsavedstate"
	"github.com/landform-dev/landform/runner"
)

// collected is what the reconcile learns from the run in status.run: that
// it goes on, or how it ended.
type collected struct {
	// running is how the reconcile ends while the run goes on.
	running *outcome.Outcome
	// idle is the runner of a plan run, kept for an apply that may follow
	// at once; the reconcile must use it or stop it.
	idle *runs.Idle
	// plan is the plan that run made, as it was just stored: the same
	// reconcile needs not read it back.
	plan *planstore.Plan
	// applied is the stored plan's metadata once its apply succeeded,
	// told by the run itself: the reconcile that goes on to Ready needs
	// not read it back.
	applied *storedPlan
	// destroyed is set when a destroy run succeeded.
	destroyed bool
	// failed is the plan or apply run whose failure inspectRun returns.
	// The failure belongs to the inputs that run was given: when they
	// have changed since, the reconcile plans the new ones instead of
	// reporting it for them.
	failed *infrav1.RunStatus
}

// storedPlan is the stored plan's metadata as the run left it; nil when
// the run tells nothing of it.
func (c *collected) storedPlan() *storedPlan {
	if c.plan != nil {
		return metaOf(c.plan)
	}
	return c.applied
}

// inspectRun handles the run recorded in status.run: it follows it when
// this process does not yet (a restart, a new leader), reports it in
// progress while it runs, and once it ended records its outcome and
// clears status.run. A run is never started again: an apply or destroy
// whose runner was lost is followed by a new plan from the real state.
func (r *TerraformReconciler) inspectRun(ctx context.Context, obj *infrav1.Terraform) (*collected, error) {
	key := client.ObjectKeyFromObject(obj)
	run := obj.Status.Run
	h := r.Runs.Get(key)
	if h == nil || h.ID() != run.ID {
		var err error
		if h, err = r.attachRun(ctx, obj); err != nil {
			if errors.Is(err, runs.ErrShuttingDown) {
				return nil, outcome.WaitingFor(infrav1.ShuttingDownReason, time.Minute, "%s run %s is followed again when the controller is back", run.Action, run.ID)
			}
			return nil, err
		}
	}
	select {
	case <-h.Done():
	default:
		o := r.runProgress(obj, h)
		o.Following = true
		return &collected{running: &o}, nil
	}
	// Finished once, however it ended: its runner stopped and its slot
	// given back, but for a plan that succeeded, whose runner waits
	// for the apply.
	idle := r.Runs.Finish(h)
	_, runErr := h.Result()
	var attachErr *runs.AttachError
	switch {
	case errors.Is(runErr, runs.ErrDetached):
		return nil, outcome.WaitingFor(infrav1.ShuttingDownReason, time.Minute, "%s run %s goes on in its runner; the next controller collects it", run.Action, run.ID)
	case errors.As(runErr, &attachErr):
		// Not known to be gone: keep status.run and look again.
		return nil, outcome.Retry(infrav1.RunnerFailedReason, "following %s run %s again: %v", run.Action, run.ID, attachErr.Err)
	}
	obj.Status.Run = nil
	metrics.CountRun(run.Action, runErr)
	c, err := actionOf(run).collect(ctx, r, obj, run, h, idle)
	// The run's log is written while its result is recorded here; status
	// says the run ended once the log is there to read, or after
	// logWait when the API server does not take it (it keeps trying).
	h.AwaitLog(logWait)
	return c, err
}

// logWait bounds the wait for a run's final log after its collection.
const logWait = 10 * time.Second

// runProgress says what the run is doing, for status while it goes on.
func (r *TerraformReconciler) runProgress(obj *infrav1.Terraform, h *runs.Handle) outcome.Outcome {
	run := obj.Status.Run
	what := run.Action + " run " + run.ID
	if run.Plan != "" {
		what += " of plan " + run.Plan
	}
	// Look again once the phase's deadline has certainly passed, in case
	// the run's end does not wake the object.
	after := obj.GetTimeout() + runner.DefaultInterruptGrace + time.Minute
	id := r.Runs.Runner(h)
	if id == "" {
		return outcome.Progress(infrav1.RunQueuedReason, after, "%s waits for a runner (revision %s)", what, run.Revision)
	}
	run.Runner = id
	if o := r.state.PersistProgress(obj, h, what, id, after); o != nil {
		return *o
	}
	return outcome.Progress(infrav1.RunInProgressReason, after, "%s in progress on %s (revision %s)", what, id, run.Revision)
}

// collectApply records the outcome of an apply run. A plan that could not
// be applied, or whose apply may have been cut short, is dropped: the next
// plan starts from the state as it really is, and an apply is never
// repeated from an old plan.
func (r *TerraformReconciler) collectApply(ctx context.Context, obj *infrav1.Terraform, run *infrav1.RunStatus, h *runs.Handle) error {
	res, runErr := h.Result()
	if runErr == nil {
		r.state.Persisted(obj, run, h)
		// Keeping the artifact is a write of its own, made while the
		// apply is recorded (on a copy: both change status).
		kept := obj.DeepCopy()
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.state.KeepApplied(ctx, kept, run)
		}()
		err := r.recordApply(ctx, obj, run, res.Outputs)
		<-done
		obj.Status.LastAppliedArtifact = kept.Status.LastAppliedArtifact
		return err
	}
	rerr, typed := runner.AsError(runErr)
	if typed && (rerr.Reason == runner.ReasonStalePlan || rerr.Reason == runner.ReasonPlanUnusable) {
		if err := r.dropPlan(ctx, obj); err != nil {
			return err
		}
		msg := fmt.Sprintf("plan %s can no longer be applied (%s); planning again", run.Plan, h.Redactor().String(rerr.Message))
		conditions.MarkFalse(obj, infrav1.AppliedCondition, infrav1.PlanUnusableReason, "%s", msg)
		r.report.Event(obj, run.Revision, corev1.EventTypeWarning, infrav1.PlanUnusableReason, "%s", msg)
		return outcome.WaitingFor(infrav1.PlanUnusableReason, outcome.ReplanSoon, "%s", msg)
	}
	if !typed || rerr.Reason != runner.ReasonStateLocked {
		// The apply may have changed some resources: never apply this
		// plan again, nor an identical one on its approval.
		if err := r.dropPlan(ctx, obj); err != nil {
			return err
		}
		obj.Status.LastFailedApplyPlan = run.Plan
	}
	return r.runFailed(ctx, obj, run, h, infrav1.AppliedCondition, infrav1.ApplyFailedReason, infrav1.ApplyTimeoutReason)
}

// collectDestroy records the outcome of a destroy run.
func (r *TerraformReconciler) collectDestroy(ctx context.Context, obj *infrav1.Terraform, run *infrav1.RunStatus, h *runs.Handle) error {
	if _, err := h.Result(); err != nil {
		return r.runFailed(ctx, obj, run, h, infrav1.AppliedCondition, infrav1.DestroyFailedReason, infrav1.DestroyTimeoutReason)
	}
	r.state.Persisted(obj, run, h)
	stateguard.MarkUnlocked(obj)
	// Nothing is applied any more: should the clean-up after it fail and
	// be retried, deletion must not destroy again (its state is gone).
	obj.Status.LastAppliedRevision = ""
	r.report.PlanEvent(obj, run.Plan, run.Revision, corev1.EventTypeNormal, infrav1.DeletingReason, "destroyed the resources of revision %s", run.Revision)
	return nil
}

// runFailed turns a run's failure into conditions, an event and the typed
// error that decides what happens next.
func (r *TerraformReconciler) runFailed(ctx context.Context, obj *infrav1.Terraform, run *infrav1.RunStatus, h *runs.Handle, condition, failedReason, timeoutReason string) error {
	// Whatever failed, the next run applies the state identity and
	// creates the state Secret and Lease again, in case one of them was
	// deleted (the identity cannot create what it may use).
	r.Custody.Forget(obj)
	_, runErr := h.Result()
	var lost *runs.LostError
	switch {
	case errors.Is(runErr, runs.ErrAbandoned):
		return outcome.WaitingFor(infrav1.ProgressingReason, outcome.ReplanSoon, "%s run %s was given up before it started", run.Action, run.ID)
	case errors.As(runErr, &lost):
		msg := fmt.Sprintf("the runner of %s run %s is gone (%s)", run.Action, run.ID, h.Redactor().String(lost.Why))
		r.report.Event(obj, run.Revision, corev1.EventTypeWarning, infrav1.RunLostReason, "%s; planning again from the state", msg)
		conditions.MarkFalse(obj, condition, infrav1.RunLostReason, "%s", msg)
		if err := r.state.RecoverLock(ctx, obj); err != nil {
			return err
		}
		return outcome.WaitingFor(infrav1.RunLostReason, outcome.ReplanSoon, "%s; planning again from the state", msg)
	}
	ferr := r.runFailure(obj, h.Redactor(), run.Revision, runErr, failedReason)
	if rerr, ok := runner.AsError(runErr); ok {
		switch rerr.Reason {
		case runner.ReasonStateLocked:
			return r.state.LockHeld(ctx, obj, rerr.Metadata)
		case runner.ReasonStateUnsaved:
			ferr = outcome.Retry(infrav1.StateUnsavedReason, "%s run %s: %s; the state is kept in Secret %s and Landform writes it to the backend before the next run",
				run.Action, run.ID, h.Redactor().String(rerr.Message), unsavedstate.SecretName(obj))
		case runner.ReasonDeadlineExceeded:
			ferr = outcome.Retry(timeoutReason, "the %s phase ran out of spec.timeout (%s) and terraform was interrupted, saving its state: raise spec.timeout or make the module faster; Landform plans again from the saved state",
				run.Action, obj.GetTimeout())
		}
	}
	reason := outcome.ReasonOf(ferr, failedReason)
	conditions.MarkFalse(obj, condition, reason, "%s", ferr.Error())
	r.report.RunEvent(obj, run, corev1.EventTypeWarning, reason, "%s run failed: %s", run.Action, ferr.Error())
	return ferr
}
