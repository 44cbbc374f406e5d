package runs

import (
	"errors"
	"fmt"
)

// The ways a run ends without a result from its runner. The controller
// decides what each means for its object; a failure the runner reported
// is its runner.Error, unchanged.
var (
	// ErrShuttingDown refuses new runs while the controller drains.
	ErrShuttingDown = errors.New("the controller is shutting down")
	// ErrAbandoned ends a run given up before it started terraform.
	ErrAbandoned = errors.New("the run was given up before it started")
	// ErrDetached ends the watch of a run this process stopped following;
	// the run goes on in its runner.
	ErrDetached = errors.New("stopped following the run")
)

// LostError is a run whose runner went away before reporting how the run
// ended.
type LostError struct{ Why string }

func (e *LostError) Error() string { return e.Why }

func lost(format string, args ...any) error {
	return &LostError{Why: fmt.Sprintf(format, args...)}
}

// AttachError is a failure to follow a recorded run that does not prove
// its runner gone (the API server unreachable, say).
type AttachError struct{ Err error }

func (e *AttachError) Error() string { return e.Err.Error() }
func (e *AttachError) Unwrap() error { return e.Err }

// StartError is a run whose runner could not be started or given its
// workspace or its state token. Reason is the condition reason when the
// cause says it (a placement refusal, the cached artifact); empty, the
// controller classifies Err (a runner.Error, say) itself. Stalling marks a
// refusal retrying cannot fix. Message is redacted.
type StartError struct {
	Reason   string
	Stalling bool
	Err      error
}

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }
