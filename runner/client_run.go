package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/landform-dev/landform/runner/internal/chunk"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// StartRun hands a run to the runner, which starts it in the background and
// keeps its log and result until it exits.
func (c *Client) StartRun(ctx context.Context, spec RunSpec) error {
	action, ok := map[Action]runnerpb.Action{Plan: runnerpb.Action_PLAN, Apply: runnerpb.Action_APPLY, Destroy: runnerpb.Action_DESTROY}[spec.Action]
	switch {
	case !ok:
		return fmt.Errorf("start run: unknown action %q", spec.Action)
	case spec.ID == "":
		return errors.New("start run: no run id")
	case spec.Action == Apply && len(spec.PlanFile) == 0:
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
		Engine:          spec.Engine,
	}}})
	if err == nil {
		err = chunk.Send(spec.PlanFile, func(b []byte) error {
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

// StatePersist is a state an apply or destroy could not write to the
// backend, which the runner keeps and writes itself (see
// runnerpb.StatePersist).
type StatePersist struct {
	// State is the state as the engine wrote it; nil once Saved.
	State []byte
	// Digest is the state's sha256, hex.
	Digest string
	// Saved is set once the runner wrote it to the backend.
	Saved bool
}

// WatchOption adds to what WatchRun reports.
type WatchOption func(*watchOptions)

type watchOptions struct {
	persist func(StatePersist)
}

// OnStatePersist passes f the state the run keeps unsaved, when it begins
// to, and again once it is saved; f runs in the watch, which waits for it.
func OnStatePersist(f func(StatePersist)) WatchOption {
	return func(o *watchOptions) { o.persist = f }
}

// WatchRun follows run id from log line fromLine until it ends, passing
// each line with its index to logf, and returns its result or its typed
// error (*Error, see AsError; UNKNOWN_RUN when the runner has no such run).
// A broken watch returns an error for which IsWatchBroken is true: the run
// goes on, and watching again from the next index resumes it. Ending ctx
// ends the watch, never the run.
func (c *Client) WatchRun(ctx context.Context, id string, fromLine int64, logf func(index int64, line string), opts ...WatchOption) (*RunResult, error) {
	var o watchOptions
	for _, opt := range opts {
		opt(&o)
	}
	stream, err := c.rpc.WatchRun(ctx, &runnerpb.WatchRunRequest{RunId: id, FromLine: fromLine})
	if err != nil {
		return nil, toError(err)
	}
	var planFile, jsonPlan, humanPlan, lockFile, unsaved bytes.Buffer
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
		case *runnerpb.RunEvent_UnsavedStateChunk:
			unsaved.Write(e.UnsavedStateChunk)
		case *runnerpb.RunEvent_StatePersist:
			p := StatePersist{Digest: e.StatePersist.GetDigest(), Saved: e.StatePersist.GetSaved()}
			if !p.Saved {
				p.State = bytes.Clone(unsaved.Bytes())
			}
			unsaved.Reset()
			if o.persist != nil {
				o.persist(p)
			}
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

// Exit asks the runner to exit now that its runs were collected. It fails
// with ReasonRunnerBusy while a run is in progress, and with
// codes.Unimplemented from a runner older than the call.
func (c *Client) Exit(ctx context.Context) error {
	if _, err := c.rpc.Exit(ctx, &runnerpb.ExitRequest{}); err != nil {
		return toError(err)
	}
	return nil
}

// Recycle asks the runner to make itself ready for another object's runs
// (runnerpb.RunnerServer.Recycle), and to exit by itself after idleExit
// without a call. It fails with ReasonRunnerBusy or ReasonNotRecyclable,
// and with codes.Unimplemented from a runner older than the call.
func (c *Client) Recycle(ctx context.Context, idleExit time.Duration) error {
	req := &runnerpb.RecycleRequest{IdleExitSeconds: int64((idleExit + time.Second - 1) / time.Second)}
	if _, err := c.rpc.Recycle(ctx, req); err != nil {
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
