package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/landform-dev/landform/runner"
	"github.com/landform-dev/landform/runner/internal/chunk"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// Bounds of one run's kept log. Beyond them the rest is replaced by one
// marker line: a runner keeps every run until it exits.
const (
	maxRunLines = 20000
	maxRunBytes = 8 << 20
)

// Causes that end a run's context, told apart when the run ends.
var (
	errRunDeadline  = errors.New("the phase ran out of time")
	errRunCancelled = errors.New("the run was cancelled")
)

// run is one plan, apply or destroy. It runs on a context of its own, not
// the call's that started it, and keeps its log and result until the
// runner exits, for any number of watches.
type run struct {
	id     string
	spec   *runnerpb.RunSpec
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	lines   []string
	bytes   int
	dropped int
	// changed is closed and replaced whenever lines or done change.
	changed chan struct{}
	done    bool
	plan    *runner.PlanOutput
	outputs []*runnerpb.Output
	err     error
	// unsaved is the state the engine could not write to the backend,
	// which every watch sends (watch.go); zero when there is none.
	unsaved keptState

	// lockID is the state lock the run holds, when the runner took it.
	// Owned by the run's goroutine.
	lockID string
}

// keptState is a state the runner keeps because the engine could not
// write it: its bytes, as the engine wrote them, until saved.
type keptState struct {
	data   []byte
	digest string
	saved  bool
}

func newRun(spec *runnerpb.RunSpec) *run {
	return &run{id: spec.GetRunId(), spec: spec, changed: make(chan struct{})}
}

// log appends a line to the run's log.
func (r *run) log(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dropped > 0 || len(r.lines) >= maxRunLines-1 || r.bytes+len(line) > maxRunBytes {
		if r.dropped == 0 {
			r.lines = append(r.lines, overflowMarker(0))
			r.notifyLocked()
		}
		r.dropped++
		return
	}
	r.lines = append(r.lines, line)
	r.bytes += len(line)
	r.notifyLocked()
}

// finish records how the run ended.
func (r *run) finish(plan *runner.PlanOutput, outputs []*runnerpb.Output, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dropped > 0 {
		// Watches from now on see how much is missing.
		r.lines[len(r.lines)-1] = overflowMarker(r.dropped)
	}
	r.plan, r.outputs, r.err, r.done = plan, outputs, err, true
	r.notifyLocked()
}

// keepState records the state the engine could not save, for the watches.
func (r *run) keepState(data []byte) {
	sum := sha256.Sum256(data)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unsaved = keptState{data: data, digest: hex.EncodeToString(sum[:])}
	r.notifyLocked()
}

// stateSaved records that the kept state is in the backend now.
func (r *run) stateSaved() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unsaved.saved = true
	r.notifyLocked()
}

func overflowMarker(dropped int) string {
	if dropped == 0 {
		return fmt.Sprintf("(the rest of this run's log is not kept: a run keeps at most %d lines or %d MiB)", maxRunLines, maxRunBytes>>20)
	}
	return fmt.Sprintf("(%d more lines of this run's log were not kept: a run keeps at most %d lines or %d MiB)", dropped, maxRunLines, maxRunBytes>>20)
}

func (r *run) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// snapshot returns the lines from index from on, the kept state, whether
// the run ended, and a channel closed at the next change.
func (r *run) snapshot(from int64) ([]string, keptState, bool, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var lines []string
	if from < int64(len(r.lines)) {
		lines = append(lines, r.lines[max(from, 0):]...)
	}
	return lines, r.unsaved, r.done, r.changed
}

// StartRun accepts a run and starts it in the background, on a context of
// its own: the call, its connection or its caller may go away, the run
// goes on.
func (s *Server) StartRun(stream runnerpb.Runner_StartRunServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	spec := first.GetSpec()
	if spec == nil || spec.GetRunId() == "" {
		return status.Error(codes.InvalidArgument, "the first message must carry the run spec with its id")
	}
	switch spec.GetAction() {
	case runnerpb.Action_PLAN, runnerpb.Action_APPLY, runnerpb.Action_DESTROY:
	default:
		return status.Errorf(codes.InvalidArgument, "unknown action %v", spec.GetAction())
	}
	if spec.GetDeadlineSeconds() < 0 {
		return status.Error(codes.InvalidArgument, "a negative deadline")
	}
	// Checked before the plan file is read, so that a retry does not
	// transfer it again; register checks again.
	if known, err := s.admit(spec.GetRunId()); known || err != nil {
		if err != nil {
			return err
		}
		return stream.SendAndClose(&runnerpb.StartRunResponse{})
	}

	planPath := ""
	if spec.GetAction() == runnerpb.Action_APPLY {
		if planPath, err = s.receivePlanFile(stream); err != nil {
			return err
		}
	}
	r, ctx, err := s.register(spec)
	if r == nil {
		os.Remove(planPath)
		if err != nil {
			return err
		}
		return stream.SendAndClose(&runnerpb.StartRunResponse{})
	}
	s.log.Info("run started", "run", r.id, "action", spec.GetAction().String(), "deadline", (time.Duration(spec.GetDeadlineSeconds()) * time.Second).String())
	go func() {
		defer s.leave()
		defer r.cancel(nil)
		defer os.Remove(planPath)
		started := time.Now()
		plan, outputs, err := s.execute(ctx, r, planPath)
		r.finish(plan, outputs, err)
		s.touch()
		s.log.Info("run finished", "run", r.id, "code", status.Code(err).String(), "duration", time.Since(started).Round(time.Millisecond).String())
	}()
	return stream.SendAndClose(&runnerpb.StartRunResponse{})
}

// admit reports whether run id is known already, or why no run can start.
func (s *Server) admit(id string) (bool, error) {
	s.runsMu.Lock()
	defer s.runsMu.Unlock()
	return s.admitLocked(id)
}

func (s *Server) admitLocked(id string) (bool, error) {
	if s.runs[id] != nil {
		// Started already: a retry after a lost answer.
		return true, nil
	}
	return false, s.busyLocked()
}

// busyLocked is RUNNER_BUSY while a run is in progress, else nil.
func (s *Server) busyLocked() error {
	if cur := s.current; cur != nil && !cur.isDone() {
		return newError(codes.FailedPrecondition, runner.ReasonRunnerBusy, fmt.Sprintf("run %s is still in progress", cur.id), nil)
	}
	return nil
}

// register records a new run and returns it with the context it runs on,
// which ends at its deadline, at CancelRun or at Shutdown. It returns no
// run when the id is known already (and no error) or when no run can
// start.
func (s *Server) register(spec *runnerpb.RunSpec) (*run, context.Context, error) {
	s.runsMu.Lock()
	defer s.runsMu.Unlock()
	if known, err := s.admitLocked(spec.GetRunId()); known || err != nil {
		return nil, nil, err
	}
	// Shutdown waits for the run to end.
	if err := s.enter(); err != nil {
		return nil, nil, err
	}

	// A recycled runner waits for its next object's run a short while
	// (Recycle); the run it gets keeps it as long as a new runner, so
	// that a controller restarting meanwhile still collects it.
	s.idleExit.Store(int64(s.baseIdleExit))

	r := newRun(spec)
	ctx, cancel := context.WithCancelCause(context.Background())
	stopBase := context.AfterFunc(s.base, func() { cancel(errShuttingDown) })
	if d := spec.GetDeadlineSeconds(); d > 0 {
		var cancelDeadline context.CancelFunc
		ctx, cancelDeadline = context.WithTimeoutCause(ctx, time.Duration(d)*time.Second,
			fmt.Errorf("%w (its deadline is %s)", errRunDeadline, time.Duration(d)*time.Second))
		cancelRun := cancel
		cancel = func(cause error) { cancelRun(cause); cancelDeadline() }
	}
	r.cancel = func(cause error) { cancel(cause); stopBase() }
	s.runs[r.id] = r
	s.current = r
	return r, ctx, nil
}

// receivePlanFile stores an apply's plan file in the runner's temp dir.
func (s *Server) receivePlanFile(stream runnerpb.Runner_StartRunServer) (string, error) {
	f, err := os.CreateTemp(s.tmpDir, "apply-*.tfplan")
	if err != nil {
		return "", internalError("create plan file", err)
	}
	path := f.Name()
	f.Close()
	os.Remove(path)
	size, err := chunk.ReceiveFile(path, func() ([]byte, error) {
		msg, err := stream.Recv()
		if err != nil {
			return nil, err
		}
		if msg.GetSpec() != nil {
			return nil, status.Error(codes.InvalidArgument, "only the first message may carry the run spec")
		}
		return msg.GetPlanFileChunk(), nil
	})
	if err != nil {
		os.Remove(path)
		if _, isStatus := status.FromError(err); isStatus {
			return "", err
		}
		return "", internalError("receive plan file", err)
	}
	if size == 0 {
		os.Remove(path)
		return "", status.Error(codes.InvalidArgument, "no plan file received")
	}
	return path, nil
}

// CancelRun interrupts a run gracefully. Cancelling a finished run changes
// nothing.
func (s *Server) CancelRun(_ context.Context, req *runnerpb.CancelRunRequest) (*runnerpb.CancelRunResponse, error) {
	s.runsMu.Lock()
	r := s.runs[req.GetRunId()]
	s.runsMu.Unlock()
	if r == nil {
		return nil, newError(codes.NotFound, runner.ReasonUnknownRun, fmt.Sprintf("no run %q on this runner", req.GetRunId()), nil)
	}
	r.cancel(errRunCancelled)
	return &runnerpb.CancelRunResponse{}, nil
}

func (r *run) isDone() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done
}

// enter starts a piece of work the shutdown waits for, unless the runner
// is shutting down.
func (s *Server) enter() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutting {
		return newError(codes.Unavailable, runner.ReasonInterrupted, "runner is shutting down", nil)
	}
	s.running++
	return nil
}

// leave ends a piece of work the shutdown waits for.
func (s *Server) leave() {
	s.mu.Lock()
	s.running--
	s.maybeDrainedLocked()
	s.mu.Unlock()
}
