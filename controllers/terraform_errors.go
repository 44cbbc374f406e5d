package controllers

import (
	"errors"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// stallingError is a configuration error that retrying cannot fix: the
// object waits for a change of its spec or source.
type stallingError struct {
	reason string
	err    error
}

func (e *stallingError) Error() string { return e.err.Error() }
func (e *stallingError) Unwrap() error { return e.err }

// waitingError is an expected pause: a dependency, an approval, a lock.
type waitingError struct {
	reason string
	err    error
	after  time.Duration
}

func (e *waitingError) Error() string { return e.err.Error() }
func (e *waitingError) Unwrap() error { return e.err }

// retryError is a failure worth retrying after the retry interval.
type retryError struct {
	reason string
	err    error
}

func (e *retryError) Error() string { return e.err.Error() }
func (e *retryError) Unwrap() error { return e.err }

// inProgressError is a run under way: Reconciling, Ready unknown, and a
// look again after `after` in case the run's end does not wake the object.
type inProgressError struct {
	reason string
	err    error
	after  time.Duration
}

func (e *inProgressError) Error() string { return e.err.Error() }
func (e *inProgressError) Unwrap() error { return e.err }

func inProgress(reason string, after time.Duration, format string, args ...any) error {
	return &inProgressError{reason: reason, after: after, err: fmt.Errorf(format, args...)}
}

func stalling(reason string, format string, args ...any) error {
	return &stallingError{reason: reason, err: fmt.Errorf(format, args...)}
}

func waiting(reason string, after time.Duration, format string, args ...any) error {
	return &waitingError{reason: reason, after: after, err: fmt.Errorf(format, args...)}
}

func retry(reason string, format string, args ...any) error {
	return &retryError{reason: reason, err: fmt.Errorf(format, args...)}
}

// errorReason is the condition reason an error carries, or fallback.
func errorReason(err error, fallback string) string {
	var s *stallingError
	var w *waitingError
	var r *retryError
	var p *inProgressError
	switch {
	case errors.As(err, &p):
		return p.reason
	case errors.As(err, &s):
		return s.reason
	case errors.As(err, &w):
		return w.reason
	case errors.As(err, &r):
		return r.reason
	}
	return fallback
}

// resultFor maps a reconcile outcome to what controller-runtime should do
// next. It is the one place that decides between requeueing and waiting.
func resultFor(err error, success time.Duration, retryAfter time.Duration) (ctrl.Result, error) {
	var s *stallingError
	var w *waitingError
	var p *inProgressError
	switch {
	case err == nil:
		return ctrl.Result{RequeueAfter: success}, nil
	case errors.As(err, &p):
		return ctrl.Result{RequeueAfter: p.after}, nil
	case errors.As(err, &s):
		// A spec or source change triggers the next reconcile.
		return ctrl.Result{}, nil
	case errors.As(err, &w):
		return ctrl.Result{RequeueAfter: w.after}, nil
	default:
		return ctrl.Result{RequeueAfter: retryAfter}, nil
	}
}
