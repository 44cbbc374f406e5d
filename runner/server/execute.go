package server

import (
	"context"
	"fmt"
	"sync"

	"github.com/landform-dev/landform/runner"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// execute runs r to its end: it waits for the workspace, initialises it,
// takes the state lock under the runner's identity, runs terraform and
// releases the lock whatever terraform did.
func (s *Server) execute(ctx context.Context, r *run, planPath string) (*runner.PlanOutput, []*runnerpb.Output, error) {
	select {
	case s.op <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, contextStatus(ctx)
	}
	defer func() { <-s.op }()

	ws, err := s.requireWorkspace()
	if err != nil {
		return nil, nil, err
	}
	for _, f := range ws.shippedStates {
		r.log(fmt.Sprintf("Landform ignored %s, shipped in the module's artifact: only a state the engine writes during a run is taken for one it could not save.", f))
	}
	spec := r.spec
	eng, err := s.engineFor(ctx, spec.GetEngine())
	if err != nil {
		return nil, nil, err
	}
	if err := ws.useEngine(eng); err != nil {
		return nil, nil, err
	}
	if lf := spec.GetLockFile(); len(lf) > 0 {
		if err := s.useLockFile(ws, lf); err != nil {
			return nil, nil, err
		}
	}
	// Before init: an engine without import blocks refuses them there.
	if err := ws.placeImports(spec.GetAction() == runnerpb.Action_PLAN && !spec.GetDestroy()); err != nil {
		return nil, nil, err
	}
	if err := s.useStateToken(ws, spec.GetStateToken()); err != nil {
		return nil, nil, err
	}
	if !ws.initialised {
		s.seedState(ctx, ws, r.log)
	}
	if err := s.ensureInit(ctx, ws, r.log); err != nil {
		if len(spec.GetLockFile()) > 0 {
			err = planLockUnusable(err)
		}
		return nil, nil, err
	}
	unlock, locked, err := s.lockState(ctx, ws, r)
	if err != nil {
		return nil, nil, err
	}
	release := &lockRelease{unlock: unlock, done: make(chan struct{})}
	defer release.wait()

	switch spec.GetAction() {
	case runnerpb.Action_PLAN:
		out, err := s.plan(ctx, ws, spec.GetDestroy(), locked, r.log, release.start)
		return out, nil, err
	case runnerpb.Action_APPLY:
		outs, err := s.apply(ctx, ws, planPath, locked, r)
		return nil, outs, err
	default:
		return nil, nil, s.destroy(ctx, ws, locked, r)
	}
}

// lockRelease releases the state lock once: early, in the background, when
// the plan file is written (`show -json` reads that file, not the state),
// or at the end of the run; wait returns once it is released, so a run
// never reports its end while still holding the lock.
type lockRelease struct {
	once   sync.Once
	unlock func()
	done   chan struct{}
}

func (l *lockRelease) start() {
	l.once.Do(func() {
		go func() {
			defer close(l.done)
			l.unlock()
		}()
	})
}

func (l *lockRelease) wait() {
	l.start()
	<-l.done
}
