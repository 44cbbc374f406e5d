package controllers

import (
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// outcomeKind says what a reconcile that ended this way needs next.
type outcomeKind int

const (
	// succeeded: Ready, and the next drift check.
	succeeded outcomeKind = iota
	// progressing: a run is under way; its end wakes the object, and a
	// look again after `after` covers an end that does not.
	progressing
	// stalled: a configuration that retrying cannot fix; the object waits
	// for a change of its spec or source.
	stalled
	// waitingFor: an expected pause (a dependency, an approval, a lock),
	// looked at again after `after`.
	waitingFor
	// retrying: a failure retried after the retry interval.
	retrying
)

// outcome is how one reconcile, or one of its steps, ended: the one value
// that says which conditions, requeue, metric and log line follow. Steps
// return it as an error so that an early return carries it up unchanged,
// wrapped or not; any other error is a retrying outcome with its caller's
// reason. outcomeOf is the one place that tells them apart.
type outcome struct {
	kind   outcomeKind
	reason string
	after  time.Duration
	cause  error
}

func (o *outcome) Error() string { return o.cause.Error() }
func (o *outcome) Unwrap() error { return o.cause }

func newOutcome(kind outcomeKind, reason string, after time.Duration, format string, args ...any) error {
	return &outcome{kind: kind, reason: reason, after: after, cause: fmt.Errorf(format, args...)}
}

func inProgress(reason string, after time.Duration, format string, args ...any) error {
	return newOutcome(progressing, reason, after, format, args...)
}

func stalling(reason string, format string, args ...any) error {
	return newOutcome(stalled, reason, 0, format, args...)
}

// stalledUntil is a stall that a person ends outside the object's spec
// and source (releasing a Secret), looked at again after `after`.
func stalledUntil(reason string, after time.Duration, format string, args ...any) error {
	return newOutcome(stalled, reason, after, format, args...)
}

func waiting(reason string, after time.Duration, format string, args ...any) error {
	return newOutcome(waitingFor, reason, after, format, args...)
}

func retry(reason string, format string, args ...any) error {
	return newOutcome(retrying, reason, 0, format, args...)
}

// outcomeOf classifies err: nil succeeded, an outcome is itself (its cause
// the whole chain), anything else is retried with reason fallback.
func outcomeOf(err error, fallback string) outcome {
	var o *outcome
	switch {
	case err == nil:
		return outcome{kind: succeeded, reason: infrav1.ReconciliationSucceededReason}
	case errors.As(err, &o):
		return outcome{kind: o.kind, reason: o.reason, after: o.after, cause: err}
	}
	return outcome{kind: retrying, reason: fallback, cause: err}
}

// reasonOf is the condition reason err carries, or fallback.
func reasonOf(err error, fallback string) string {
	return outcomeOf(err, fallback).reason
}

// decided reports whether err already carries its reason.
func decided(err error) bool {
	var o *outcome
	return errors.As(err, &o)
}

// result is what controller-runtime does next. success is the requeue of a
// reconcile that ended well (the next drift check).
func (o outcome) result(success, retryAfter time.Duration) ctrl.Result {
	switch o.kind {
	case succeeded:
		return ctrl.Result{RequeueAfter: success}
	case progressing, waitingFor:
		return ctrl.Result{RequeueAfter: o.after}
	case stalled:
		// A spec or source change triggers the next reconcile; a stall a
		// person ends outside the spec (stalledUntil) is looked at again.
		return ctrl.Result{RequeueAfter: o.after}
	}
	return ctrl.Result{RequeueAfter: retryAfter}
}

// metric names the outcome for the reconcile metrics.
func (o outcome) metric() string {
	return [...]string{succeeded: "success", progressing: "progressing", stalled: "stalled", waitingFor: "waiting", retrying: "retry"}[o.kind]
}

// summarize sets Ready, Reconciling and Stalled from the outcome. It is the
// only place that writes the kstatus conditions.
func (o outcome) summarize(obj *infrav1.Terraform) {
	if v, ok := obj.GetAnnotations()[meta.ReconcileRequestAnnotation]; ok {
		obj.Status.LastHandledReconcileAt = v
	}
	if obj.Spec.Suspend && obj.DeletionTimestamp.IsZero() {
		conditions.Delete(obj, meta.ReconcilingCondition)
		return
	}
	switch o.kind {
	case progressing:
		conditions.Delete(obj, meta.StalledCondition)
		conditions.MarkReconciling(obj, o.reason, "%s", o.cause.Error())
		conditions.MarkUnknown(obj, meta.ReadyCondition, o.reason, "%s", o.cause.Error())
		return
	case succeeded:
		conditions.Delete(obj, meta.ReconcilingCondition)
		conditions.Delete(obj, meta.StalledCondition)
		conditions.MarkTrue(obj, meta.ReadyCondition, o.reason, "%s", readyMessage(obj))
	case stalled:
		conditions.Delete(obj, meta.ReconcilingCondition)
		conditions.MarkStalled(obj, o.reason, "%s", o.cause.Error())
		conditions.MarkFalse(obj, meta.ReadyCondition, o.reason, "%s", o.cause.Error())
	case waitingFor:
		conditions.Delete(obj, meta.StalledCondition)
		conditions.Delete(obj, meta.ReconcilingCondition)
		conditions.MarkFalse(obj, meta.ReadyCondition, o.reason, "%s", o.cause.Error())
	case retrying:
		conditions.Delete(obj, meta.StalledCondition)
		// Reconciling while a failure is retried: kstatus (and a Flux
		// health check) sees work in progress, not success.
		conditions.MarkReconciling(obj, infrav1.ProgressingWithRetryReason, "retrying after: %s", o.reason)
		conditions.MarkFalse(obj, meta.ReadyCondition, o.reason, "%s", o.cause.Error())
		return
	}
	// A success, a stall and a wait are what this generation comes to.
	obj.Status.ObservedGeneration = obj.Generation
}
