// Package placement decides where a runner runs: a local child process or
// a Pod in the Terraform object's namespace. The controller sees only the
// Placer interface.
package placement

import (
	"context"
	"time"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/runner"
)

// Run is one started runner, dedicated to one run of one object.
type Run struct {
	// Client talks to the runner over mTLS.
	Client *runner.Client
	// Backend holds the kubernetes backend settings that depend on where the
	// runner runs: a kubeconfig path locally, in-cluster config in a Pod.
	Backend map[string]string

	stop  func(grace time.Duration) error
	grace time.Duration
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
	// Start starts a runner for obj and returns once it answers its health
	// check, or ctx ends.
	Start(ctx context.Context, obj *infrav1.Terraform) (*Run, error)
}

// Error is a failure to start a runner that the user can act on: Reason is
// a condition reason (infrav1.Runner*Reason) and Message says what to do.
type Error struct {
	Reason  string
	Message string
}

func (e *Error) Error() string { return e.Message }
