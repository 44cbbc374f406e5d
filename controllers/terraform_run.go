package controllers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/planstore"
	"github.com/landform-dev/landform/internal/runlog"
	"github.com/landform-dev/landform/runner"
)

// run starts one runner for this reconcile, hands it the workspace and
// performs the decided action. A plan that is approved on the spot (auto
// approval, or an id approved ahead) is applied by the same runner.
func (r *TerraformReconciler) run(ctx context.Context, obj *infrav1.Terraform, ws *workspace, d decision) (ctrl.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, obj.GetTimeout())
	defer cancel()

	rn, err := r.startRunner(ctx, obj, ws)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		if err := rn.Stop(); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "stopping runner")
		}
	}()

	switch d.action {
	case actionOutputs:
		return r.nextCheck(obj), r.refreshOutputs(ctx, rn, obj, ws)
	case actionApply:
		p, err := r.Plans.Load(ctx, obj)
		if err != nil {
			return ctrl.Result{}, retry(infrav1.ApplyFailedReason, "loading plan %s: %v", obj.PendingPlan(), err)
		}
		return r.nextCheck(obj), r.apply(ctx, rn, obj, ws, p)
	}

	p, err := r.plan(ctx, rn, obj, ws, d.drift)
	if err != nil {
		return ctrl.Result{}, err
	}
	switch {
	case p.Applied:
		if !outputsUpToDate(obj) {
			return r.nextCheck(obj), r.refreshOutputs(ctx, rn, obj, ws)
		}
		return r.nextCheck(obj), nil
	case approved(obj, p.ID):
		return r.nextCheck(obj), r.apply(ctx, rn, obj, ws, p)
	case obj.Spec.PlanOnly:
		return r.nextCheck(obj), nil
	default:
		return ctrl.Result{}, waiting(infrav1.PlanPendingReason, obj.GetInterval(), "%s", pendingMessage(obj))
	}
}

// nextCheck requeues at the next drift check, so that every path that ends
// well keeps the object on its interval.
func (r *TerraformReconciler) nextCheck(obj *infrav1.Terraform) ctrl.Result {
	if obj.Spec.DisableDriftDetection {
		return ctrl.Result{RequeueAfter: obj.GetInterval()}
	}
	return ctrl.Result{RequeueAfter: max(driftCheckDue(obj, r.now()), time.Second)}
}

// startRunner places a runner and uploads the workspace to it.
func (r *TerraformReconciler) startRunner(ctx context.Context, obj *infrav1.Terraform, ws *workspace) (*placement.Run, error) {
	rn, err := r.Placer.Start(ctx, obj)
	// A failure the user can act on (a missing ServiceAccount, a Pod
	// that cannot start) keeps its own reason.
	var perr *placement.Error
	if errors.As(err, &perr) {
		return nil, retry(perr.Reason, "%s", ws.redactor.String(perr.Message))
	}
	if err != nil {
		return nil, retry(infrav1.RunnerFailedReason, "starting the runner: %s", ws.redactor.String(err.Error()))
	}
	f, err := os.Open(ws.tarball)
	if err != nil {
		_ = rn.Stop()
		return nil, retry(infrav1.ArtifactFailedReason, "opening the cached artifact: %v", err)
	}
	defer f.Close()
	if err := rn.Client.UploadWorkspace(ctx, workspaceSpec(obj, ws, rn.Backend), f); err != nil {
		_ = rn.Stop()
		return nil, r.runnerFailure(obj, ws, err, infrav1.RunnerFailedReason)
	}
	return rn, nil
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
	return &storedPlan{ID: p.ID, InputsDigest: p.InputsDigest, Applied: p.Applied}, nil
}

// startLog begins the kept log of one phase (read by `landform logs`) and
// returns its line sink and the function that ends it. Lines are redacted
// first, and reach the controller's own log at debug verbosity only.
func (r *TerraformReconciler) startLog(ctx context.Context, obj *infrav1.Terraform, ws *workspace, phase runlog.Phase) (func(string), func(error)) {
	rec := runlog.Start(ctx, r.Client, obj, phase)
	debug := ctrl.LoggerFrom(ctx).V(1).WithValues("phase", phase)
	line := func(s string) {
		s = ws.redactor.String(s)
		debug.Info(s)
		rec.Line(s)
	}
	end := func(runErr error) {
		if err := rec.End(ctx, runErr); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "keeping the run log")
		}
	}
	return line, end
}

// runnerFailure turns a runner error into a typed reconcile error with a
// condition reason and a message that says what to do.
func (r *TerraformReconciler) runnerFailure(obj *infrav1.Terraform, ws *workspace, err error, fallback string) error {
	rerr, ok := runner.AsError(err)
	if !ok {
		return retry(fallback, "%s", ws.redactor.String(err.Error()))
	}
	msg := ws.redactor.String(rerr.Message)
	switch rerr.Reason {
	case runner.ReasonStateLocked:
		markLocked(obj, rerr.Metadata)
		return waiting(infrav1.StateLockedReason, obj.GetRetryInterval(),
			"the state is locked by %s (lock %s, %s since %s); Landform retries until the holder releases it",
			orUnknown(rerr.Metadata["who"]), orUnknown(rerr.Metadata["id"]), orUnknown(rerr.Metadata["operation"]), orUnknown(rerr.Metadata["created"]))
	case runner.ReasonInvalidConfiguration:
		return stalling(infrav1.InvalidConfigurationReason, "the module in revision %s is invalid: %s; fix it and push a new revision", ws.artifact.Revision, msg)
	case runner.ReasonMissingVariable:
		return retry(infrav1.MissingVariableReason, "%s; set it in spec.vars or spec.varsFrom", msg)
	case runner.ReasonDigestMismatch:
		return retry(infrav1.DigestMismatchReason, "the runner rejected the artifact: %s", msg)
	case runner.ReasonInvalidPath:
		return stalling(infrav1.InvalidPathReason, "spec.path %q: %s", obj.Spec.Path, msg)
	}
	return retry(fallback, "%s", msg)
}

// markLocked records who holds the state lock.
func markLocked(obj *infrav1.Terraform, md map[string]string) {
	obj.Status.Lock = &infrav1.LockStatus{ID: md["id"], Holder: md["who"]}
	conditions.MarkTrue(obj, infrav1.StateLockedCondition, infrav1.StateLockedReason,
		"state locked by %s (lock %s)", orUnknown(md["who"]), orUnknown(md["id"]))
}

// markUnlocked clears the lock after a run got through.
func markUnlocked(obj *infrav1.Terraform) {
	obj.Status.Lock = nil
	conditions.Delete(obj, infrav1.StateLockedCondition)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
