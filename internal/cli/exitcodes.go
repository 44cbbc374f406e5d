package cli

import (
	"errors"
	"fmt"
	"io"
)

// Exit codes a pipeline can branch on, as docs/cli.md ("Exit codes")
// documents them. Like terraform's -detailed-exitcode, 2 is not a failure:
// there are changes a person (or the next step) has to see to.
const (
	// ExitOK: done, nothing left to do.
	ExitOK = 0
	// ExitError: anything that went wrong: a failed reconcile, a refusal,
	// a usage or connection error.
	ExitError = 1
	// ExitPending: with reconcile --until=planned, changes are pending:
	// the plan made waits for approval or has changes (being applied, or
	// kept by planOnly). Without --until=planned a pending approval is
	// waited through.
	ExitPending = 2
	// ExitTimeout: --timeout ran out before the object was done.
	ExitTimeout = 3
)

// exitError is an error that ends the command with its own exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// pendingChanges returns err ending the command with ExitPending.
func pendingChanges(err error) error { return &exitError{code: ExitPending, err: err} }

// timedOut returns err ending the command with ExitTimeout.
func timedOut(err error) error { return &exitError{code: ExitTimeout, err: err} }

// ExitCode is the exit code a command that returned err ends with.
func ExitCode(err error) int {
	var e *exitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &e):
		return e.code
	}
	return ExitError
}

// Report prints what a command that returned err ends with, on w (stderr),
// and returns its exit code. Pending changes are not an error, and are not
// printed as one.
func Report(w io.Writer, err error) int {
	code := ExitCode(err)
	switch code {
	case ExitOK:
	case ExitPending:
		fmt.Fprintln(w, err)
	default:
		fmt.Fprintln(w, "error:", err)
	}
	return code
}

// worst is the exit code of several outcomes: an error outweighs a
// timeout, which outweighs pending changes.
func worst(codes ...int) int {
	rank := map[int]int{ExitOK: 0, ExitPending: 1, ExitTimeout: 2, ExitError: 3}
	w := ExitOK
	for _, c := range codes {
		if rank[c] > rank[w] {
			w = c
		}
	}
	return w
}
