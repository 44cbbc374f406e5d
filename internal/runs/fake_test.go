package runs

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/runner"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// fakePlacer starts fake runners: one runner process stands for one
// placement.Run, whose client serves the protocol's calls from memory.
// It counts what a run asks of it.
type fakePlacer struct {
	durable bool
	// parks marks its runs KeptOnStop.
	parks bool
	// startErr fails every Start.
	startErr error
	// stopping, when set, holds every runner's stop until it is closed.
	stopping chan struct{}

	mu       sync.Mutex
	runners  []*fakeRunner
	byRun    map[string]*fakeRunner // run id -> runner serving it
	starts   int
	attaches int
	stops    int
}

func newFakePlacer() *fakePlacer { return &fakePlacer{byRun: map[string]*fakeRunner{}} }

func (p *fakePlacer) Durable() bool { return p.durable }

func (p *fakePlacer) Start(ctx context.Context, obj *infrav1.Terraform, runID string) (*placement.Run, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starts++
	if p.startErr != nil {
		return nil, p.startErr
	}
	fr := &fakeRunner{p: p, name: fmt.Sprintf("fake runner %d", len(p.runners)+1), alive: true, runs: map[string]*fakeRun{}, breaks: make(chan struct{})}
	p.runners = append(p.runners, fr)
	return fr.placed(), nil
}

func (p *fakePlacer) Attach(ctx context.Context, obj *infrav1.Terraform, runID string) (*placement.Run, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attaches++
	fr := p.byRun[runID]
	if fr == nil || !fr.isAlive() {
		return nil, fmt.Errorf("no runner serves run %s: %w", runID, placement.ErrRunnerGone)
	}
	return fr.placed(), nil
}

func (p *fakePlacer) counts() (starts, attaches, stops int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts, p.attaches, p.stops
}

// fakeRunner is one runner: its workspace, its runs and their logs.
type fakeRunner struct {
	p    *fakePlacer
	name string

	mu        sync.Mutex
	alive     bool
	uploads   int
	tokens    []string
	runs      map[string]*fakeRun
	cancelled []string
	// breaks is closed to break the watches in progress, as a lost
	// connection does.
	breaks chan struct{}
}

// breakWatches breaks the watches in progress.
func (fr *fakeRunner) breakWatches() {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	close(fr.breaks)
	fr.breaks = make(chan struct{})
}

// fakeRun is a run on a fake runner: its log grows and it ends when the
// test says so, or when it is cancelled.
type fakeRun struct {
	spec    runner.RunSpec
	mu      sync.Mutex
	lines   []string
	changed chan struct{}
	ended   bool
	result  *runner.RunResult
	err     error
}

func (fr *fakeRunner) placed() *placement.Run {
	rn := fr.newRun()
	rn.KeptOnStop = fr.p.parks
	return rn
}

func (fr *fakeRunner) newRun() *placement.Run {
	return placement.NewRun(fr, fr.name, map[string]string{"config_path": "/dev/null"},
		func() error {
			if fr.p.stopping != nil {
				<-fr.p.stopping
			}
			fr.mu.Lock()
			fr.alive = false
			fr.mu.Unlock()
			fr.p.mu.Lock()
			fr.p.stops++
			fr.p.mu.Unlock()
			return nil
		},
		func(context.Context) (bool, string) {
			if fr.isAlive() {
				return true, ""
			}
			return false, fr.name + " exited"
		})
}

func (fr *fakeRunner) isAlive() bool {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return fr.alive
}

func (fr *fakeRunner) run(id string) *fakeRun {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return fr.runs[id]
}

func (fr *fakeRunner) UploadWorkspace(ctx context.Context, spec *runnerpb.WorkspaceSpec, tarball io.Reader) error {
	if _, err := io.Copy(io.Discard, tarball); err != nil {
		return err
	}
	fr.mu.Lock()
	defer fr.mu.Unlock()
	fr.uploads++
	return nil
}

func (fr *fakeRunner) StartRun(ctx context.Context, spec runner.RunSpec) error {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	if fr.runs[spec.ID] != nil {
		return nil // idempotent by id
	}
	fr.tokens = append(fr.tokens, spec.StateToken)
	fr.runs[spec.ID] = &fakeRun{spec: spec, changed: make(chan struct{})}
	fr.p.mu.Lock()
	fr.p.byRun[spec.ID] = fr
	fr.p.mu.Unlock()
	return nil
}

func (fr *fakeRunner) WatchRun(ctx context.Context, id string, from int64, logf func(int64, string), _ ...runner.WatchOption) (*runner.RunResult, error) {
	r := fr.run(id)
	if r == nil {
		return nil, &runner.Error{Code: codes.NotFound, Reason: runner.ReasonUnknownRun, Message: "unknown run " + id}
	}
	fr.mu.Lock()
	breaks := fr.breaks
	fr.mu.Unlock()
	next := from
	for {
		r.mu.Lock()
		lines, ended, changed := r.lines, r.ended, r.changed
		r.mu.Unlock()
		for ; next < int64(len(lines)); next++ {
			logf(next, lines[next])
		}
		if ended {
			return r.result, r.err
		}
		select {
		case <-changed:
		case <-breaks:
			return nil, status.Error(codes.Unavailable, "connection reset")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (fr *fakeRunner) CancelRun(ctx context.Context, id string) error {
	fr.mu.Lock()
	fr.cancelled = append(fr.cancelled, id)
	fr.mu.Unlock()
	if r := fr.run(id); r != nil {
		r.end(nil, &runner.Error{Code: codes.Canceled, Reason: runner.ReasonInterrupted, Message: "interrupted"})
	}
	return nil
}

func (fr *fakeRunner) Outputs(context.Context) ([]*runnerpb.Output, error) { return nil, nil }
func (fr *fakeRunner) Close() error                                        { return nil }

func (r *fakeRun) log(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *fakeRun) end(res *runner.RunResult, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return
	}
	r.ended, r.result, r.err = true, res, err
	close(r.changed)
	r.changed = make(chan struct{})
}

// fakeTokens issues numbered tokens; reusable says whether a reused
// runner's token still serves.
type fakeTokens struct {
	mu       sync.Mutex
	issued   int
	reusable bool
	err      error
}

func (t *fakeTokens) Issue(context.Context, *infrav1.Terraform, time.Duration) (string, time.Time, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return "", time.Time{}, t.err
	}
	t.issued++
	return fmt.Sprintf("token-%d", t.issued), time.Now().Add(time.Hour), nil
}

func (t *fakeTokens) Reusable(time.Time, time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reusable
}

func (t *fakeTokens) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.issued
}
