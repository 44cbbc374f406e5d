// Package outcome is how a reconcile of a Terraform object, or one of its
// steps, ended: succeeded, progressing (a run under way), stalled (a
// configuration that retrying cannot fix), waiting (a dependency, an
// approval, a lock) or retrying (a failure). It is the one value that
// decides the conditions, the requeue, the metric and the log line.
//
// A reconcile that did not get through (stalled, waiting, retrying) ends
// with an error: steps return such an outcome as an error, so that an
// early return carries it up unchanged, wrapped or not, through any
// package (internal/inputs returns them too); any other error is a
// retrying outcome with its caller's reason, and Of is the one place that
// tells them apart. A reconcile that got through ends with a value: Done,
// or Progress while a run it started or follows goes on. A run under way
// is no failure, so it never travels as an error; the steps that start or
// follow runs return it beside their error, and Ended joins the two.
package outcome

import (
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// Kind says what a reconcile that ended this way needs next.
type Kind int

const (
	// Succeeded: Ready, and the next drift check.
	Succeeded Kind = iota
	// Progressing: a run is under way; its end wakes the object, and a
	// look again after After covers an end that does not.
	Progressing
	// Stalled: a configuration that retrying cannot fix; the object waits
	// for a change of its spec or source.
	Stalled
	// Waiting: an expected pause (a dependency, an approval, a lock),
	// looked at again after After.
	Waiting
	// Retrying: a failure retried after the retry interval.
	Retrying
)

// ReplanSoon is how soon an object plans again after a run that must not
// be repeated as it was (a lost runner, an unusable plan, a released
// lock).
const ReplanSoon = time.Second

// Outcome is how one reconcile, or one of its steps, ended.
type Outcome struct {
	Kind   Kind
	Reason string
	After  time.Duration
	Cause  error
	// Following: a run recorded by an earlier reconcile goes on. A
	// reconcile request made since is not handled by it: its plan was
	// made, or is being made, from what stood before the request, so the
	// request is answered once the run ended (Summarize leaves it).
	Following bool
}

func (o *Outcome) Error() string { return o.Cause.Error() }
func (o *Outcome) Unwrap() error { return o.Cause }

func newOutcome(kind Kind, reason string, after time.Duration, format string, args ...any) error {
	return &Outcome{Kind: kind, Reason: reason, After: after, Cause: fmt.Errorf(format, args...)}
}

// Progress is a run under way, looked at again after after.
func Progress(reason string, after time.Duration, format string, args ...any) Outcome {
	return Outcome{Kind: Progressing, Reason: reason, After: after, Cause: fmt.Errorf(format, args...)}
}

// Done is a reconcile that got through, looked at again after after (0:
// when something changes).
func Done(after time.Duration) Outcome {
	return Outcome{Kind: Succeeded, Reason: infrav1.ReconciliationSucceededReason, After: after}
}

// Ended is how a reconcile ended: err's outcome when it did not get
// through, else done, the value its steps returned (the zero Outcome is
// Done(0)).
func Ended(done Outcome, err error, fallback string) Outcome {
	if err != nil {
		return Of(err, fallback)
	}
	if done.Kind == Succeeded && done.Reason == "" {
		return Done(done.After)
	}
	return done
}

// Stalling is a configuration retrying cannot fix.
func Stalling(reason string, format string, args ...any) error {
	return newOutcome(Stalled, reason, 0, format, args...)
}

// StalledUntil is a stall that a person ends outside the object's spec
// and source (releasing a Secret), looked at again after after.
func StalledUntil(reason string, after time.Duration, format string, args ...any) error {
	return newOutcome(Stalled, reason, after, format, args...)
}

// WaitingFor is an expected pause, looked at again after after.
func WaitingFor(reason string, after time.Duration, format string, args ...any) error {
	return newOutcome(Waiting, reason, after, format, args...)
}

// Retry is a failure retried after the retry interval.
func Retry(reason string, format string, args ...any) error {
	return newOutcome(Retrying, reason, 0, format, args...)
}

// Of classifies err: nil succeeded, an outcome is itself (its cause the
// whole chain), anything else is retried with reason fallback.
func Of(err error, fallback string) Outcome {
	var o *Outcome
	switch {
	case err == nil:
		return Done(0)
	case errors.As(err, &o):
		return Outcome{Kind: o.Kind, Reason: o.Reason, After: o.After, Cause: err}
	}
	return Outcome{Kind: Retrying, Reason: fallback, Cause: err}
}

// ReasonOf is the condition reason err carries, or fallback.
func ReasonOf(err error, fallback string) string {
	return Of(err, fallback).Reason
}

// Decided reports whether err already carries its reason.
func Decided(err error) bool {
	var o *Outcome
	return errors.As(err, &o)
}

// Result is what controller-runtime does next; a failure is retried after
// retryAfter.
func (o Outcome) Result(retryAfter time.Duration) ctrl.Result {
	switch o.Kind {
	case Succeeded, Progressing, Waiting:
		return ctrl.Result{RequeueAfter: o.After}
	case Stalled:
		// A spec or source change triggers the next reconcile; a stall a
		// person ends outside the spec (StalledUntil) is looked at again.
		return ctrl.Result{RequeueAfter: o.After}
	}
	return ctrl.Result{RequeueAfter: retryAfter}
}

// Metric names the outcome for the reconcile metrics.
func (o Outcome) Metric() string {
	return [...]string{Succeeded: "success", Progressing: "progressing", Stalled: "stalled", Waiting: "waiting", Retrying: "retry"}[o.Kind]
}

// Summarize sets Ready, Reconciling and Stalled from the outcome, ready
// being Ready's message on success. It is the only place that writes the
// kstatus conditions.
func (o Outcome) Summarize(obj *infrav1.Terraform, ready string) {
	if v, ok := obj.GetAnnotations()[meta.ReconcileRequestAnnotation]; ok && !o.Following {
		obj.Status.LastHandledReconcileAt = v
	}
	if obj.Spec.Suspend && obj.DeletionTimestamp.IsZero() {
		conditions.Delete(obj, meta.ReconcilingCondition)
		return
	}
	switch o.Kind {
	case Progressing:
		conditions.Delete(obj, meta.StalledCondition)
		conditions.MarkReconciling(obj, o.Reason, "%s", o.Cause.Error())
		conditions.MarkUnknown(obj, meta.ReadyCondition, o.Reason, "%s", o.Cause.Error())
		return
	case Succeeded:
		conditions.Delete(obj, meta.ReconcilingCondition)
		conditions.Delete(obj, meta.StalledCondition)
		conditions.MarkTrue(obj, meta.ReadyCondition, o.Reason, "%s", ready)
	case Stalled:
		conditions.Delete(obj, meta.ReconcilingCondition)
		conditions.MarkStalled(obj, o.Reason, "%s", o.Cause.Error())
		conditions.MarkFalse(obj, meta.ReadyCondition, o.Reason, "%s", o.Cause.Error())
	case Waiting:
		conditions.Delete(obj, meta.StalledCondition)
		conditions.Delete(obj, meta.ReconcilingCondition)
		conditions.MarkFalse(obj, meta.ReadyCondition, o.Reason, "%s", o.Cause.Error())
	case Retrying:
		conditions.Delete(obj, meta.StalledCondition)
		// Reconciling while a failure is retried: kstatus (and a Flux
		// health check) sees work in progress, not success.
		conditions.MarkReconciling(obj, infrav1.ProgressingWithRetryReason, "retrying after: %s", o.Reason)
		conditions.MarkFalse(obj, meta.ReadyCondition, o.Reason, "%s", o.Cause.Error())
		return
	}
	// A success, a stall and a wait are what this generation comes to.
	obj.Status.ObservedGeneration = obj.Generation
}
