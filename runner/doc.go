// Package runner is the runner protocol's client side: the narrow client
// the controller drives a runner with, the wire types of a run, and the
// typed errors a runner answers with (a gRPC code and an ErrorInfo reason,
// which the controller acts on, never the text). The protocol itself is
// runner/proto; the executor that serves it in the runner process is
// runner/server, which the controller does not link.
//
// One runner serves one workspace: the controller starts a runner (a Pod,
// or a child process with StartLocal), uploads the workspace, and starts
// runs (plan, apply, destroy) on it, one at a time. A run is durable: it
// has an id chosen by the controller (NewRunID) and keeps its log and
// result until the runner exits, so that a controller that lost its
// connection or restarted watches it again by its id (WatchRun,
// IsWatchBroken). Only the run's deadline, CancelRun or the runner's
// shutdown interrupt terraform, gracefully.
package runner
