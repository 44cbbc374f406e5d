// Package placement decides where a runner runs: a local child process or
// a Pod in the Terraform object's namespace. The controller sees only the
// Placer interface.
package placement

import (
	"context"
	"errors"
	"io"
	"time"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/runner"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// Run is one started runner, dedicated to one run of one object.
type Run struct {
	// Client talks to the runner over mTLS.
	Client RunnerClient
	// Backend holds the kubernetes backend settings that depend on where the
	// runner runs: a kubeconfig path locally, in-cluster config in a Pod.
	Backend map[string]string
	// Identity names the runner for status.run and messages: a Pod's
	// namespace/name, or a local process.
	Identity string
	// StateTokenValidUntil is set by the controller when it hands the
	// runner a token of the object's state identity: a following run on
	// the same runner that ends before then needs no new token.
	StateTokenValidUntil time.Time
	// KeptOnStop is set when stopping the run keeps its runner for another
	// run (a runner Pod with --runner-pod-reuse): whoever stops it waits
	// for the stop, so that the next run finds the runner kept.
	KeptOnStop bool

	stop  func(grace time.Duration) error
	grace time.Duration
	alive func(ctx context.Context) (bool, string)
	// forgetState lets a local runner's directory go whole (StateKept).
	forgetState func()
}

// StateKept tells the runner's placement that the controller keeps its own
// copy of a state the runner reported unsaved (or that it is written): a
// local runner need not leave it behind in its directory.
func (r *Run) StateKept() {
	if r.forgetState != nil {
		r.forgetState()
	}
}

// RunnerClient is what the controller asks of a runner: *runner.Client,
// or a test's fake behind a Placer of its own.
type RunnerClient interface {
	UploadWorkspace(ctx context.Context, spec *runnerpb.WorkspaceSpec, tarball io.Reader) error
	StartRun(ctx context.Context, spec runner.RunSpec) error
	WatchRun(ctx context.Context, id string, fromLine int64, logf func(index int64, line string), opts ...runner.WatchOption) (*runner.RunResult, error)
	CancelRun(ctx context.Context, id string) error
	Outputs(ctx context.Context) ([]*runnerpb.Output, error)
	Close() error
}

// NewRun is a runner started by a Placer outside this package (a test's):
// stop ends it, alive reports whether it may still run (nil: always).
func NewRun(c RunnerClient, identity string, backend map[string]string, stop func() error, alive func(context.Context) (bool, string)) *Run {
	return &Run{Client: c, Identity: identity, Backend: backend, stop: func(time.Duration) error { return stop() }, alive: alive}
}

// Alive reports whether the runner may still be running, and if not, why:
// a run whose watch broke is resumed only while its runner is alive.
func (r *Run) Alive(ctx context.Context) (bool, string) {
	if r.alive == nil {
		return true, ""
	}
	return r.alive(ctx)
}

// Stop ends the run: the runner gets SIGTERM and time to let terraform
// release its lock before it is killed.
func (r *Run) Stop() error {
	if r.stop == nil {
		return nil
	}
	return r.stop(r.grace)
}

// Placer starts runners.
type Placer interface {
	// Start starts a runner for run runID of obj and returns once it
	// answers its health check, or ctx ends.
	Start(ctx context.Context, obj *infrav1.Terraform, runID string) (*Run, error)
	// Attach reconnects to the runner serving runID, started by an earlier
	// controller process. It fails with an error wrapping ErrRunnerGone
	// when no runner serves the run any more.
	Attach(ctx context.Context, obj *infrav1.Terraform, runID string) (*Run, error)
	// Durable reports whether runners outlive the controller (Pods): then
	// the controller may exit at once on shutdown, and its successor
	// attaches to the runs in flight. Local runners end with the
	// controller, which therefore drains them first.
	Durable() bool
}

// ErrRunnerGone means the runner of a run no longer exists.
var ErrRunnerGone = errors.New("the runner is gone")

// Error is a failure to start a runner that the user can act on: Reason is
// a condition reason (infrav1.Runner*Reason) and Message says what to do.
type Error struct {
	Reason  string
	Message string
	// Stalling marks a refusal that retrying cannot fix: the object's spec
	// (or the controller's flags) must change.
	Stalling bool
}

func (e *Error) Error() string { return e.Message }
