package runner

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// RunAction is what a run does.
type RunAction int

// The actions of a run.
const (
	RunPlan RunAction = iota + 1
	RunApply
	RunDestroy
)

// RunSpec is one run as the controller asks for it.
type RunSpec struct {
	// ID identifies the run; starting the same id twice starts it once.
	ID     string
	Action RunAction
	// Destroy plans the destruction of everything (RunPlan).
	Destroy bool
	// Deadline bounds the run, counted by the runner from its start.
	Deadline time.Duration
	// PlanFile is the saved plan to apply (RunApply).
	PlanFile []byte
	// LockFile is the dependency lock file the plan was made with
	// (RunApply).
	LockFile []byte
	// StateToken is the bearer token of the object's state identity (see
	// runnerpb.RunSpec.state_token); never logged.
	StateToken string
}

// RunResult is what a run produced.
type RunResult struct {
	// Plan is a plan run's output.
	Plan *PlanOutput
	// Outputs are the outputs after an apply.
	Outputs []*runnerpb.Output
}

// cancelTimeout bounds the CancelRun sent when a caller of the blocking
// helpers gives up.
const cancelTimeout = 10 * time.Second

// StartRun hands a run to the runner, which starts it in the background and
// keeps its log and result until it exits.
func (c *Client) StartRun(ctx context.Context, spec RunSpec) error {
	action, ok := map[RunAction]runnerpb.Action{RunPlan: runnerpb.Action_PLAN, RunApply: runnerpb.Action_APPLY, RunDestroy: runnerpb.Action_DESTROY}[spec.Action]
	switch {
	case !ok:
		return fmt.Errorf("start run: unknown action %d", spec.Action)
	case spec.ID == "":
		return errors.New("start run: no run id")
	case spec.Action == RunApply && len(spec.PlanFile) == 0:
		return errors.New("apply: empty plan file")
	case spec.Deadline < 0:
		return errors.New("start run: negative deadline")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.rpc.StartRun(ctx)
	if err != nil {
		return toError(err)
	}
	err = stream.Send(&runnerpb.StartRunRequest{Msg: &runnerpb.StartRunRequest_Spec{Spec: &runnerpb.RunSpec{
		RunId:           spec.ID,
		Action:          action,
		Destroy:         spec.Destroy,
		DeadlineSeconds: int64((spec.Deadline + time.Second - 1) / time.Second),
		LockFile:        spec.LockFile,
		StateToken:      spec.StateToken,
	}}})
	if err == nil {
		err = sendChunks(spec.PlanFile, func(b []byte) error {
			return stream.Send(&runnerpb.StartRunRequest{Msg: &runnerpb.StartRunRequest_PlanFileChunk{PlanFileChunk: b}})
		})
	}
	// On io.EOF the runner already answered (a run it knows); the status
	// comes from CloseAndRecv.
	if err != nil && !errors.Is(err, io.EOF) {
		return toError(err)
	}
	if _, err := stream.CloseAndRecv(); err != nil {
		return toError(err)
	}
	return nil
}

// WatchRun follows run id from log line fromLine until it ends, passing
// each line with its index to logf, and returns its result or its typed
// error (*Error, see AsError; UNKNOWN_RUN when the runner has no such run).
// A broken watch returns an error for which IsWatchBroken is true: the run
// goes on, and watching again from the next index resumes it. Ending ctx
// ends the watch, never the run.
func (c *Client) WatchRun(ctx context.Context, id string, fromLine int64, logf func(index int64, line string)) (*RunResult, error) {
	stream, err := c.rpc.WatchRun(ctx, &runnerpb.WatchRunRequest{RunId: id, FromLine: fromLine})
	if err != nil {
		return nil, toError(err)
	}
	var planFile, jsonPlan, humanPlan, lockFile bytes.Buffer
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil, &watchBroken{err: errors.New("the watch ended without a result")}
		}
		if err != nil {
			return nil, toError(err)
		}
		switch e := ev.Event.(type) {
		case *runnerpb.RunEvent_Log:
			if logf != nil {
				logf(e.Log.GetIndex(), e.Log.GetText())
			}
		case *runnerpb.RunEvent_PlanFileChunk:
			planFile.Write(e.PlanFileChunk)
		case *runnerpb.RunEvent_JsonPlanChunk:
			jsonPlan.Write(e.JsonPlanChunk)
		case *runnerpb.RunEvent_HumanPlanChunk:
			humanPlan.Write(e.HumanPlanChunk)
		case *runnerpb.RunEvent_LockFileChunk:
			lockFile.Write(e.LockFileChunk)
		case *runnerpb.RunEvent_PlanResult:
			return &RunResult{Plan: &PlanOutput{Result: e.PlanResult, PlanFile: planFile.Bytes(), JSONPlan: jsonPlan.Bytes(), HumanPlan: humanPlan.Bytes(), LockFile: lockFile.Bytes()}}, nil
		case *runnerpb.RunEvent_ApplyResult:
			return &RunResult{Outputs: e.ApplyResult.GetOutputs()}, nil
		}
	}
}

// CancelRun asks the runner to interrupt run id gracefully.
func (c *Client) CancelRun(ctx context.Context, id string) error {
	if _, err := c.rpc.CancelRun(ctx, &runnerpb.CancelRunRequest{RunId: id}); err != nil {
		return toError(err)
	}
	return nil
}

// watchBroken is a watch that ended without the run's end.
type watchBroken struct{ err error }

func (e *watchBroken) Error() string { return e.err.Error() }
func (e *watchBroken) Unwrap() error { return e.err }

// IsWatchBroken reports an error that says nothing about the run, only
// that the call did not get through: the connection broke, the runner was
// unreachable, or the caller's context ended. The run may well go on:
// dialling again and watching from the last line seen resumes it. A typed
// runner error (one with a Reason) is an answer, never broken.
func IsWatchBroken(err error) bool {
	if err == nil {
		return false
	}
	var wb *watchBroken
	if errors.As(err, &wb) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	e, ok := AsError(err)
	if !ok || e.Reason != "" {
		return false
	}
	switch e.Code {
	case codes.Unavailable, codes.Canceled, codes.DeadlineExceeded, codes.Aborted, codes.Internal:
		// What gRPC reports for a lost connection, a reset stream or
		// a call that ran out of time.
		return true
	}
	return false
}

// Plan runs a plan to its end (the destruction of everything when destroy
// is set), passing each log line to logf. Ending ctx interrupts it.
func (c *Client) Plan(ctx context.Context, destroy bool, logf func(line string)) (*PlanOutput, error) {
	res, err := c.runToEnd(ctx, RunSpec{Action: RunPlan, Destroy: destroy}, logf)
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
	res, err := c.runToEnd(ctx, RunSpec{Action: RunApply, PlanFile: planFile, LockFile: lockFile}, logf)
	if err != nil {
		return nil, err
	}
	return res.Outputs, nil
}

// Destroy destroys everything in the state. Ending ctx interrupts it.
func (c *Client) Destroy(ctx context.Context, logf func(string)) error {
	_, err := c.runToEnd(ctx, RunSpec{Action: RunDestroy}, logf)
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

// NewRunID returns a run id that no other run of any object shares.
func NewRunID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "run-" + hex.EncodeToString(b)
}
