package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/inputs"
	"github.com/landform-dev/landform/internal/outcome"
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/redact"
	"github.com/landform-dev/landform/internal/runs"
	"github.com/landform-dev/landform/internal/stateguard"
	"github.com/landform-dev/landform/runner"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// startRun records the run of action a in status, writes that status,
// and only then hands it to the run tracker: a controller that dies at any
// point afterwards leaves enough behind for its successor to find the
// run. A runner a plan left for its apply (applyRun) is its reconcile's
// to stop when no run takes it.
func (r *TerraformReconciler) startRun(ctx context.Context, patcher *objectPatcher, obj *infrav1.Terraform, ws *workspace, a runAction) (outcome.Outcome, error) {
	req := a.request(r, obj, ws)
	if !r.Runs.Accepting() {
		return outcome.Outcome{}, outcome.WaitingFor(infrav1.ShuttingDownReason, time.Minute, "the controller is shutting down: the %s starts when it is back", req.Run.Action)
	}
	if err := r.state.AdmitInNamespace(ctx, obj); err != nil {
		// A preview-only namespace: nothing that is no preview runs.
		return outcome.Outcome{}, err
	}
	if err := r.checkRunner(obj, req.Redactor); err != nil {
		// Refused by the runner policy: no run is recorded or started.
		return outcome.Outcome{}, err
	}
	if err := r.state.Claim(ctx, obj); err != nil {
		// One state, one owner: refused before anything plans.
		return outcome.Outcome{}, err
	}
	if err := r.state.PushUnsaved(ctx, obj); err != nil {
		// Never a run from the backend's state while a newer one waits.
		return outcome.Outcome{}, err
	}
	req.Run.ID = runner.NewRunID()
	now := metav1.NewTime(r.now())
	req.Run.Started = &now
	req.Spec.ID = req.Run.ID
	req.Spec.Deadline = obj.GetTimeout()
	obj.Status.Run = req.Run.DeepCopy()
	queued := outcome.Progress(infrav1.RunQueuedReason, obj.GetTimeout(), "%s run %s queued for revision %s", req.Run.Action, req.Run.ID, req.Run.Revision)
	// The conditions the reconcile ends with go in this one write.
	queued.Summarize(obj, readyMessage(obj))
	if err := patcher.Patch(ctx, obj); err != nil {
		obj.Status.Run = nil
		return outcome.Outcome{}, fmt.Errorf("recording run %s: %w", req.Run.ID, err)
	}
	req.Object = obj.DeepCopy()
	if _, err := r.Runs.Launch(req); err != nil {
		// Shutting down: status.run stays, and the next controller
		// starts the run (it has no runner yet).
		return outcome.Outcome{}, outcome.WaitingFor(infrav1.ShuttingDownReason, time.Minute, "%s run %s waits for the controller to start again", req.Run.Action, req.Run.ID)
	}
	return queued, nil
}

// checkRunner asks the placement, when it can tell, whether obj's runner
// may start at all: a refusal (say, a runner image the controller does not
// allow) is a spec to fix, so it stalls before any run is recorded.
func (r *TerraformReconciler) checkRunner(obj *infrav1.Terraform, redactor *redact.Redactor) error {
	c, ok := r.Placer.(placement.Checker)
	if !ok {
		return nil
	}
	err := c.Check(obj)
	var perr *placement.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &perr) && perr.Stalling:
		return outcome.Stalling(perr.Reason, "%s", redactor.String(perr.Message))
	case errors.As(err, &perr):
		return outcome.Retry(perr.Reason, "%s", redactor.String(perr.Message))
	}
	return outcome.Retry(infrav1.RunnerFailedReason, "checking the runner: %s", redactor.String(err.Error()))
}

// attachRun follows a run recorded in status by an earlier controller
// process, collecting its result without running terraform again.
func (r *TerraformReconciler) attachRun(ctx context.Context, obj *infrav1.Terraform) (*runs.Handle, error) {
	vars, err := r.inputs.Vars(ctx, obj, inputs.Redaction)
	if err != nil {
		// Without the variables' Secrets the log cannot be redacted:
		// attach once they are readable.
		return nil, err
	}
	return r.Runs.Attach(runs.Request{Object: obj.DeepCopy(), Run: *obj.Status.Run, Redactor: redact.New(vars.Secrets...)})
}

// runFailure is the outcome of a run that failed before or in its runner,
// unless the failure was decided already: a placement refusal or a start
// failure keeps its reason, a runner's typed error is classified, and
// anything else is retried with fallback.
func (r *TerraformReconciler) runFailure(obj *infrav1.Terraform, redactor *redact.Redactor, revision string, err error, fallback string) error {
	var serr *runs.StartError
	switch {
	case outcome.Decided(err):
		return err
	case errors.As(err, &serr) && serr.Reason == "":
		return runnerError(obj, redactor, revision, serr.Err, infrav1.RunnerFailedReason)
	case errors.As(err, &serr) && serr.Stalling:
		return outcome.Stalling(serr.Reason, "%s", serr.Error())
	case errors.As(err, &serr):
		return outcome.Retry(serr.Reason, "%s", serr.Error())
	}
	return runnerError(obj, redactor, revision, err, fallback)
}

// forRunner is the workspace as a runner is given it.
func (ws *workspace) forRunner() *runs.Workspace {
	return &runs.Workspace{
		Tarball: ws.tarball,
		Spec: func(obj *infrav1.Terraform, backend map[string]string) *runnerpb.WorkspaceSpec {
			return workspaceSpec(obj, ws, backend)
		},
	}
}

// nextCheck requeues at the next drift check, so that every path that ends
// well keeps the object on its interval. The delay is jittered, so that
// objects planned together (created together, or a new revision for all)
// do not all check for drift at the same moment again: a check that comes
// a little early finds it not due yet and requeues for the rest.
func (r *TerraformReconciler) nextCheck(obj *infrav1.Terraform) outcome.Outcome {
	if obj.Spec.DisableDriftDetection {
		return outcome.Done(r.jittered(obj.GetInterval()))
	}
	return outcome.Done(r.jittered(max(driftCheckDue(obj, r.now()), time.Second)))
}

// now is the reconciler's clock (Now, which tests may set).
func (r *TerraformReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *TerraformReconciler) jittered(d time.Duration) time.Duration {
	if r.Jitter == nil {
		return d
	}
	return r.Jitter(d)
}

// priorityOf puts drift checks behind everything a person or a change is
// waiting for.
func priorityOf(obj *infrav1.Terraform, d decision) runs.Priority {
	if d.drift && !requestedReconcile(obj) {
		return runs.Background
	}
	return runs.User
}

// runnerError turns a runner error into a typed reconcile error with a
// condition reason and a message that says what to do.
func runnerError(obj *infrav1.Terraform, redactor *redact.Redactor, revision string, err error, fallback string) error {
	rerr, ok := runner.AsError(err)
	if !ok {
		return outcome.Retry(fallback, "%s", redactor.String(err.Error()))
	}
	msg := redactor.String(rerr.Message)
	switch rerr.Reason {
	case runner.ReasonStateLocked:
		return outcome.WaitingFor(infrav1.StateLockedReason, obj.GetRetryInterval(), "the state is locked by %s (lock %s)", stateguard.OrUnknown(rerr.Metadata["who"]), stateguard.OrUnknown(rerr.Metadata["id"]))
	case runner.ReasonInvalidConfiguration:
		fix := "fix it and push a new revision"
		if len(obj.Spec.Imports) > 0 {
			fix += ", or fix spec.imports"
		}
		return outcome.Stalling(infrav1.InvalidConfigurationReason, "the module in revision %s is invalid: %s; %s", revision, msg, fix)
	case runner.ReasonEngineVerificationFailed:
		return outcome.Stalling(infrav1.EngineVerificationFailedReason, "%s", msg)
	case runner.ReasonEngineUnavailable:
		return outcome.Retry(infrav1.EngineNotFoundReason, "%s", msg)
	case runner.ReasonImportUnsupported:
		return outcome.Stalling(infrav1.ImportUnsupportedReason, "spec.imports needs an engine with import blocks (OpenTofu, or Terraform 1.5 or later): %s", msg)
	case runner.ReasonMissingVariable:
		return outcome.Retry(infrav1.MissingVariableReason, "%s; set it in spec.vars or spec.varsFrom", msg)
	case runner.ReasonDigestMismatch:
		return outcome.Retry(infrav1.DigestMismatchReason, "the runner rejected the artifact: %s", msg)
	case runner.ReasonInvalidPath:
		return outcome.Stalling(infrav1.InvalidPathReason, "spec.path %q: %s", obj.Spec.Path, msg)
	}
	return outcome.Retry(fallback, "%s", msg)
}
