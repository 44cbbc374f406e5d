package controllers

import (
	"context"
	"errors"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/custody"
	"github.com/landform-dev/landform/internal/metrics"
	"github.com/landform-dev/landform/internal/outcome"
	"github.com/landform-dev/landform/internal/redact"
	"github.com/landform-dev/landform/runner"
)

// lockHeld handles a run that found the state locked. A lock left by a
// Landform runner that is provably gone is released (by its lock id) and
// the object plans again; any other holder keeps its lock, and the
// condition names it.
func (g *stateGuard) lockHeld(ctx context.Context, obj *infrav1.Terraform, md map[string]string) error {
	released, err := g.releaseGoneLock(ctx, obj)
	if err != nil {
		return err
	}
	if released {
		return outcome.WaitingFor(infrav1.StateLockReleasedReason, replanSoon, "released the state lock %s left by a runner that is gone; planning again", orUnknown(md["id"]))
	}
	markLocked(obj, md)
	return outcome.WaitingFor(infrav1.StateLockedReason, obj.GetRetryInterval(),
		"the state is locked by %s (lock %s, %s since %s); Landform retries until the holder releases it, or run `landform unlock %s` once the holder has stopped",
		orUnknown(md["who"]), orUnknown(md["id"]), orUnknown(md["operation"]), orUnknown(md["created"]), obj.Name)
}

// recoverLock releases the lock a lost run may have left behind.
func (g *stateGuard) recoverLock(ctx context.Context, obj *infrav1.Terraform) error {
	_, err := g.releaseGoneLock(ctx, obj)
	return err
}

// releaseGoneLock releases the state lock when its holder is a Landform
// runner that is provably gone (custody.Keeper.ReleaseGoneLock), and says
// so. It reports whether it released one.
func (g *stateGuard) releaseGoneLock(ctx context.Context, obj *infrav1.Terraform) (bool, error) {
	held, gone, err := g.keeper.ReleaseGoneLock(ctx, obj)
	switch {
	case errors.Is(err, custody.ErrNotOurBackend):
		return false, nil
	case err != nil:
		return false, outcome.Retry(infrav1.StateLockedReason, "%v", err)
	case held == nil:
		markUnlocked(obj)
	}
	if gone == nil {
		return false, nil
	}
	metrics.CountLockRecovered()
	ctrl.LoggerFrom(ctx).Info("released a state lock whose runner is gone", "lock", gone.Info.ID, "holder", gone.Info.Who, "why", gone.Why)
	g.report.event(obj, obj.Status.LastAttemptedRevision, corev1.EventTypeWarning, infrav1.StateLockReleasedReason,
		"released state lock %s held by %s: %s", gone.Info.ID, gone.Info.Who, gone.Why)
	return true, nil
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
		return outcome.WaitingFor(infrav1.StateLockedReason, obj.GetRetryInterval(), "the state is locked by %s (lock %s)", orUnknown(rerr.Metadata["who"]), orUnknown(rerr.Metadata["id"]))
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

// markLocked records who holds the state lock.
func markLocked(obj *infrav1.Terraform, md map[string]string) {
	obj.Status.Lock = &infrav1.LockStatus{ID: md["id"], Holder: md["who"]}
	if t, ok := lockCreated(md["created"]); ok {
		obj.Status.Lock.Since = &metav1.Time{Time: t}
	}
	conditions.MarkTrue(obj, infrav1.StateLockedCondition, infrav1.StateLockedReason,
		"state locked by %s (lock %s)", orUnknown(md["who"]), orUnknown(md["id"]))
}

// lockCreated reads when a lock was taken: RFC 3339 from Landform's own
// lock, Go's time format from the "Lock Info" terraform prints for a
// custom backend's lock.
func lockCreated(v string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999 -0700 MST"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
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
