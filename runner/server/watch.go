package server

import (
	"fmt"

	"google.golang.org/grpc/codes"

	"github.com/landform-dev/landform/runner"
	"github.com/landform-dev/landform/runner/internal/chunk"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// WatchRun streams a run's log from the requested line, live, then its
// artefacts and result, or its error. The run does not depend on the
// watch: a watch that ends, for whatever reason, changes nothing.
func (s *Server) WatchRun(req *runnerpb.WatchRunRequest, stream runnerpb.Runner_WatchRunServer) error {
	s.runsMu.Lock()
	r := s.runs[req.GetRunId()]
	s.runsMu.Unlock()
	if r == nil {
		return newError(codes.NotFound, runner.ReasonUnknownRun, fmt.Sprintf("no run %q on this runner", req.GetRunId()), nil)
	}
	next := max(req.GetFromLine(), 0)
	var sent keptState
	for {
		lines, kept, done, changed := r.snapshot(next)
		for _, line := range lines {
			if err := stream.Send(&runnerpb.RunEvent{Event: &runnerpb.RunEvent_Log{Log: &runnerpb.LogLine{Text: line, Index: next}}}); err != nil {
				return err
			}
			next++
		}
		if err := sendKeptState(stream, kept, &sent); err != nil {
			return err
		}
		if done {
			return sendResult(stream, r)
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
}

// sendResult sends a finished run's artefacts and result, or returns its
// error.
func sendResult(stream runnerpb.Runner_WatchRunServer, r *run) error {
	r.mu.Lock()
	plan, outputs, err := r.plan, r.outputs, r.err
	r.mu.Unlock()
	if err != nil {
		return err
	}
	if plan == nil {
		return stream.Send(&runnerpb.RunEvent{Event: &runnerpb.RunEvent_ApplyResult{ApplyResult: &runnerpb.ApplyResult{Outputs: outputs}}})
	}
	for _, f := range []struct {
		data []byte
		wrap func([]byte) *runnerpb.RunEvent
	}{
		{plan.PlanFile, func(b []byte) *runnerpb.RunEvent {
			return &runnerpb.RunEvent{Event: &runnerpb.RunEvent_PlanFileChunk{PlanFileChunk: b}}
		}},
		{plan.JSONPlan, func(b []byte) *runnerpb.RunEvent {
			return &runnerpb.RunEvent{Event: &runnerpb.RunEvent_JsonPlanChunk{JsonPlanChunk: b}}
		}},
		{plan.HumanPlan, func(b []byte) *runnerpb.RunEvent {
			return &runnerpb.RunEvent{Event: &runnerpb.RunEvent_HumanPlanChunk{HumanPlanChunk: b}}
		}},
		{plan.LockFile, func(b []byte) *runnerpb.RunEvent {
			return &runnerpb.RunEvent{Event: &runnerpb.RunEvent_LockFileChunk{LockFileChunk: b}}
		}},
	} {
		if err := chunk.Send(f.data, func(b []byte) error { return stream.Send(f.wrap(b)) }); err != nil {
			return err
		}
	}
	return stream.Send(&runnerpb.RunEvent{Event: &runnerpb.RunEvent_PlanResult{PlanResult: plan.Result}})
}

// sendKeptState tells the watch about the state the run keeps unsaved,
// whatever the watch's offset: its bytes and an event when the runner
// began keeping it (unless it is saved already), and an event once it is
// saved. sent is what this watch has sent.
func sendKeptState(stream runnerpb.Runner_WatchRunServer, kept keptState, sent *keptState) error {
	if kept.digest == "" {
		return nil
	}
	if sent.digest != kept.digest {
		if !kept.saved {
			if err := chunk.Send(kept.data, func(b []byte) error {
				return stream.Send(&runnerpb.RunEvent{Event: &runnerpb.RunEvent_UnsavedStateChunk{UnsavedStateChunk: b}})
			}); err != nil {
				return err
			}
			if err := stream.Send(&runnerpb.RunEvent{Event: &runnerpb.RunEvent_StatePersist{StatePersist: &runnerpb.StatePersist{Digest: kept.digest}}}); err != nil {
				return err
			}
		}
		*sent = keptState{digest: kept.digest}
	}
	if kept.saved && !sent.saved {
		if err := stream.Send(&runnerpb.RunEvent{Event: &runnerpb.RunEvent_StatePersist{StatePersist: &runnerpb.StatePersist{Digest: kept.digest, Saved: true}}}); err != nil {
			return err
		}
		sent.saved = true
	}
	return nil
}
