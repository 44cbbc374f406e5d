package server

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc"

	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// touch records activity, for the idle exit.
func (s *Server) touch() { s.lastActivity.Store(time.Now().UnixNano()) }

// touchUnary and touchStream count every call to the runner service, at
// its start and its end, as activity; health checks (probes) do not count.
func (s *Server) touchUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !s.isRunnerMethod(info.FullMethod) {
		return handler(ctx, req)
	}
	s.touch()
	defer s.touch()
	return handler(ctx, req)
}

func (s *Server) touchStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if !s.isRunnerMethod(info.FullMethod) {
		return handler(srv, ss)
	}
	s.touch()
	defer s.touch()
	return handler(srv, ss)
}

func (s *Server) isRunnerMethod(fullMethod string) bool {
	return strings.HasPrefix(fullMethod, "/"+runnerpb.Runner_ServiceDesc.ServiceName+"/")
}

// Idle reports whether the runner has had nothing in progress (no run, no
// call holding the workspace) and no call for its idle-exit time: nobody
// will collect what it holds any more, and an orphaned runner Pod should
// end.
func (s *Server) Idle() bool {
	idleExit := s.IdleExit()
	if idleExit <= 0 {
		return false
	}
	s.mu.Lock()
	busy := s.running > 0
	s.mu.Unlock()
	return !busy && time.Since(time.Unix(0, s.lastActivity.Load())) > idleExit
}

// IdleExit is the runner's idle-exit time: Options.IdleExit, or what
// Recycle set.
func (s *Server) IdleExit() time.Duration { return time.Duration(s.idleExit.Load()) }
