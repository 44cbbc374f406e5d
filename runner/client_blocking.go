package runner

import (
	"context"
	"time"

	"google.golang.org/grpc/status"

	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// cancelTimeout bounds the CancelRun sent when a caller of the blocking
// helpers gives up.
const cancelTimeout = 10 * time.Second

// Plan runs a plan to its end (the destruction of everything when destroy
// is set), passing each log line to logf. Ending ctx interrupts it.
func (c *Client) Plan(ctx context.Context, destroy bool, logf func(line string)) (*PlanOutput, error) {
	res, err := c.runToEnd(ctx, RunSpec{Action: Plan, Destroy: destroy}, logf)
	if err != nil {
		return nil, err
	}
	return res.Plan, nil
}

// Apply applies a saved plan file to its end and returns the outputs.
// Ending ctx interrupts it.
func (c *Client) Apply(ctx context.Context, planFile []byte, logf func(string)) ([]*runnerpb.Output, error) {
	return c.ApplyWithLockFile(ctx, planFile, nil, logf)
}

// ApplyWithLockFile is Apply with the dependency lock file the plan was
// made with (PlanOutput.LockFile), so that the apply uses exactly the
// plan's providers.
func (c *Client) ApplyWithLockFile(ctx context.Context, planFile, lockFile []byte, logf func(string)) ([]*runnerpb.Output, error) {
	res, err := c.runToEnd(ctx, RunSpec{Action: Apply, PlanFile: planFile, LockFile: lockFile}, logf)
	if err != nil {
		return nil, err
	}
	return res.Outputs, nil
}

// Destroy destroys everything in the state. Ending ctx interrupts it.
func (c *Client) Destroy(ctx context.Context, logf func(string)) error {
	_, err := c.runToEnd(ctx, RunSpec{Action: Destroy}, logf)
	return err
}

// rewatchDelays are the pauses before watching a run again after a broken
// watch, in the blocking helpers.
var rewatchDelays = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}

// runToEnd starts a run under a fresh id and watches it to its end, as one
// blocking call: a caller that gives up (ctx ends) interrupts the run and
// gets ctx's status, as when the run lived on the call. The runner also
// enforces ctx's deadline itself.
func (c *Client) runToEnd(ctx context.Context, spec RunSpec, logf func(string)) (*RunResult, error) {
	spec.ID = NewRunID()
	if dl, ok := ctx.Deadline(); ok {
		spec.Deadline = max(time.Until(dl), time.Second)
	}
	if err := c.StartRun(ctx, spec); err != nil {
		if ctx.Err() != nil {
			// The runner may have accepted the run before the answer
			// was lost.
			c.cancelAbandoned(spec.ID)
			return nil, callerGaveUp(ctx)
		}
		return nil, err
	}
	var next int64
	lf := func(i int64, line string) {
		next = i + 1
		if logf != nil {
			logf(line)
		}
	}
	for attempt := 0; ; attempt++ {
		res, err := c.WatchRun(ctx, spec.ID, next, lf)
		switch {
		case ctx.Err() != nil:
			c.cancelAbandoned(spec.ID)
			return nil, callerGaveUp(ctx)
		case !IsWatchBroken(err) || attempt == len(rewatchDelays):
			return res, err
		}
		select {
		case <-ctx.Done():
		case <-time.After(rewatchDelays[attempt]):
		}
	}
}

// cancelAbandoned interrupts a run its caller gave up on, with a context of
// its own: the caller's has ended.
func (c *Client) cancelAbandoned(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
	defer cancel()
	_ = c.CancelRun(ctx, id)
}

// callerGaveUp is the status of a blocking call whose context ended.
func callerGaveUp(ctx context.Context) error {
	return toError(status.FromContextError(ctx.Err()).Err())
}
