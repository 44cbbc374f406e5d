package server

import (
	"context"

	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// Exit ends the runner at the controller's word once no run is in
// progress: it refuses every call after it, and Exiting tells the process
// to shut down and exit with status 0.
//
// A runner Pod used to end only when the controller deleted it: the
// kubelet stopped the running container (a Killing event, SIGTERM), and
// wrote the Pod's final deletion once it had stopped. A container that
// exits by itself ends the Pod Succeeded, which the API server deletes at
// once (a terminated Pod gets no grace period): two API writes fewer per
// run, and no signal handling. A run in progress (one nobody collected)
// keeps the runner: the controller deletes its Pod gracefully instead, as
// before. A run that ended counts as ended as soon as its watches have its
// result, although its goroutine leaves a moment later (the controller
// asks right after collecting it: `make bench-cluster` saw 7 of 50 such
// runners refuse when Exit waited for that): the shutdown waits for it.
func (s *Server) Exit(context.Context, *runnerpb.ExitRequest) (*runnerpb.ExitResponse, error) {
	s.runsMu.Lock()
	defer s.runsMu.Unlock()
	if err := s.busyLocked(); err != nil {
		return nil, err
	}
	// Under runsMu, so that no run registers between the check and this.
	s.mu.Lock()
	s.shutting = true
	s.maybeDrainedLocked()
	s.mu.Unlock()
	select {
	case <-s.exiting:
	default:
		close(s.exiting)
		s.log.Info("exiting: asked to by the controller")
	}
	return &runnerpb.ExitResponse{}, nil
}

// Exiting is closed once Exit was asked and granted: the process should
// then shut down (Shutdown finds nothing to interrupt) and exit 0.
func (s *Server) Exiting() <-chan struct{} { return s.exiting }
