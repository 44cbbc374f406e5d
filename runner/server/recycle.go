package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/landform-dev/landform/runner"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// recycleTimeout bounds the wait for the workspace to be free and for the
// killed processes to be reaped.
const recycleTimeout = 10 * time.Second

// Recycle readies the runner for another object's runs (the controller's
// --runner-pod-reuse): a runner Pod's start costs about what the engine's
// own work does (docs/benchmarks.md), so a Pod whose run ended may serve
// the next object of its namespace whose Pod would be the same.
//
// What one object's runs leave in the Pod must not reach the next's: a
// process a module left running (it could talk to the state proxy, which
// holds the next run's state token, or read the next run's variables in
// the work directory), files in the work directory (the engine launcher,
// installed engines, provider plugins: code the next run would execute),
// in HOME, /tmp and /dev/shm (--recycle-dir), the runs' logs and results,
// and the state token. So the runner kills every other process of its PID
// namespace, which only its namespace's process 1 can do without touching
// anything else (kill(-1) from process 1 reaches its namespace alone), and
// empties the directories; whatever it cannot do, it refuses, unchanged,
// and the controller ends the Pod as it would without reuse.
func (s *Server) Recycle(ctx context.Context, req *runnerpb.RecycleRequest) (*runnerpb.RecycleResponse, error) {
	if err := s.recyclable(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, recycleTimeout)
	defer cancel()
	_, end, err := s.begin(ctx, "Recycle")
	if err != nil {
		return nil, err
	}
	s.runsMu.Lock()
	defer s.runsMu.Unlock()
	if err := s.busyLocked(); err != nil {
		return nil, end(err)
	}
	if err := killOthers(ctx); err != nil {
		return nil, end(notRecyclable(err.Error()))
	}
	for _, dir := range append([]string{s.workDir}, s.recycleDirs...) {
		if err := emptyDir(dir); err != nil {
			return nil, end(notRecyclable(err.Error()))
		}
	}
	s.ws, s.runs, s.current = nil, map[string]*run{}, nil
	if s.state != nil {
		s.state.use("", "")
	}
	if err := s.prepare(); err != nil {
		return nil, end(notRecyclable(err.Error()))
	}
	if d := req.GetIdleExitSeconds(); d > 0 {
		s.idleExit.Store(int64(time.Duration(d) * time.Second))
	}
	s.log.Info("recycled for another object's runs", "idle-exit", s.IdleExit().String())
	return &runnerpb.RecycleResponse{}, end(nil)
}

// recyclable refuses a runner that cannot clear what a module leaves: one
// that is not process 1 of its PID namespace (a local runner), or whose
// engine cache is outside the work directory it empties.
func (s *Server) recyclable() error {
	if os.Getpid() != 1 {
		return notRecyclable("the runner is not process 1 of its PID namespace, so it cannot end what a module left running")
	}
	if rel, err := filepath.Rel(s.workDir, s.engineDir); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return notRecyclable("the engine cache " + s.engineDir + " is outside the work directory")
	}
	return nil
}

func notRecyclable(msg string) error {
	return newError(codes.FailedPrecondition, runner.ReasonNotRecyclable, "cannot recycle the runner: "+msg, nil)
}

// emptyDir removes everything in dir, keeping dir (a volume's mount point).
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("emptying %s: %w", dir, err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("emptying %s: %w", dir, err)
		}
	}
	return nil
}
