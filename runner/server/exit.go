package server

import (
	"context"

	"google.golang.org/grpc/codes"

	"github.com/landform-dev/landform/runner"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// Exit ends the runner at the controller's word once nothing is in
// progress: it refuses every call after it, and Exiting tells the process
// to exit with status 0.
//
// A runner Pod used to end only when the controller deleted it: the
// kubelet stopped the running container (a Killing event, SIGTERM), and
// wrote the Pod's final deletion once it had stopped. A container that
// exits by itself ends the Pod Succeeded, which the API server deletes at
// once (a terminated Pod gets no grace period): two API writes fewer per
// run, and no signal handling. A run or a call in progress (a run nobody
// collected, an upload) keeps the runner: the controller deletes its Pod
// gracefully instead, as before.
func (s *Server) Exit(context.Context, *runnerpb.ExitRequest) (*runnerpb.ExitResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running > 0 {
		return nil, newError(codes.FailedPrecondition, runner.ReasonRunnerBusy, "a run or a call is in progress: the runner does not exit", nil)
	}
	s.shutting = true
	s.maybeDrainedLocked()
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
