package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/runner"
	"github.com/landform-dev/landform/runner/internal/kubeclient"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// lockReleaseTimeout bounds releasing the state lock after terraform ended,
// on a context of its own: the run's may have ended.
const lockReleaseTimeout = 30 * time.Second

// lockState takes the state lock for run r when the workspace uses the
// default kubernetes backend: terraform then runs with -lock=false, and
// the lock carries the runner's identity, which the controller can check
// if the runner dies holding it. A plan checks the lock and takes none (it
// fails as a held lock does when someone holds it). A custom backend keeps
// terraform's own locking (locked is false). unlock releases the lock; it is not called
// when the runner itself dies, which is the case the controller recovers.
func (s *Server) lockState(ctx context.Context, ws *workspace, r *run) (unlock func(), locked bool, err error) {
	if ws.customBackend != "" {
		return func() {}, false, nil
	}
	leases, err := s.leaseClient(ws)
	if err != nil {
		return nil, false, newError(codes.InvalidArgument, runner.ReasonInvalidConfiguration, "reaching the API server for the state lock: "+err.Error(), nil)
	}
	holder := s.holder
	holder.Run = r.id
	suffix := ws.backendConfig["secret_suffix"]
	name := statelock.LeaseName(statelock.StateSecretName(ws.workspace, suffix))
	op := map[runnerpb.Action]string{
		runnerpb.Action_PLAN:    statelock.OperationPlan,
		runnerpb.Action_APPLY:   statelock.OperationApply,
		runnerpb.Action_DESTROY: statelock.OperationDestroy,
	}[r.spec.GetAction()]
	var taken *coordinationv1.Lease
	acquire := func() (id string, err error) {
		id, taken, err = statelock.AcquireLease(ctx, leases, name, holder, op, statelock.WithLabels(statelock.LeaseLabels(ws.workspace, suffix)))
		return id, err
	}
	if r.spec.GetAction() == runnerpb.Action_PLAN {
		// A plan only reads the state, so it checks the lock and takes
		// none: two Lease writes fewer per plan (make bench's write
		// table). A lock taken while it reads is harmless: the backend
		// writes a state in one Secret update, so the plan reads one
		// state or the next, and an apply refuses a plan whose state
		// changed since (terraform's stale-plan check, PlanUnusable).
		acquire = func() (string, error) {
			info, err := statelock.Read(ctx, leases, name)
			if err != nil || info == nil {
				return "", err
			}
			return "", &statelock.LockedError{Info: *info}
		}
	}
	id, err := acquire()
	var held *statelock.LockedError
	if errors.As(err, &held) && s.leftByAFinishedRun(held.Info) {
		// This runner's own earlier run could not release its lock (the
		// API server was unreachable then): nobody else can, while this
		// runner lives.
		if rerr := statelock.Release(ctx, leases, name, held.Info.ID); rerr == nil {
			r.log(fmt.Sprintf("Landform released the state lock %s left by its earlier run.", held.Info.ID))
			id, err = acquire()
		}
	}
	switch {
	case errors.As(err, &held):
		return nil, false, lockedError(held.Info)
	case err != nil && ctx.Err() != nil:
		return nil, false, contextStatus(ctx)
	case err != nil:
		return nil, false, newError(codes.Unavailable, runner.ReasonTerraformFailed, "taking the state lock: "+err.Error(), nil)
	}
	if id == "" {
		r.log("Landform found the state unlocked: the plan reads it without a lock.")
		return func() {}, true, nil
	}
	r.log(fmt.Sprintf("Landform took the state lock %s as %s.", id, holder.Who()))
	r.lockID = id
	return func() {
		if err := releaseLock(leases, taken, id); err != nil {
			s.log.Error("releasing the state lock", "run", r.id, "lock", id, "error", err.Error())
			r.log(fmt.Sprintf("Landform could not release the state lock %s: %v", id, err))
			return
		}
		r.log(fmt.Sprintf("Landform released the state lock %s.", id))
	}, true, nil
}

// releaseLock releases lock id, taken with Lease taken, retrying for a
// while on a context of its own: the run's may have ended, and a lock left
// behind blocks every run until this runner is gone. Each attempt starts
// from taken (statelock.ReleaseLease): a Lease changed since, by an
// attempt that failed only on its answer or by anyone else, is a conflict
// that ReleaseLease reads and decides again.
func releaseLock(leases statelock.Leases, taken *coordinationv1.Lease, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), lockReleaseTimeout)
	defer cancel()
	for {
		err := statelock.ReleaseLease(ctx, leases, taken, id)
		if err == nil || statelock.IsLocked(err) {
			// Released, or someone force-unlocked it and took it since:
			// not ours any more.
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}

// leftByAFinishedRun reports whether a held lock was taken by this very
// runner (its Pod or process) for a run that has ended.
func (s *Server) leftByAFinishedRun(info statelock.LockInfo) bool {
	h, ok := statelock.ParseHolder(info)
	if !ok || !sameRunner(*h, s.holder) {
		return false
	}
	s.runsMu.Lock()
	prev := s.runs[h.Run]
	s.runsMu.Unlock()
	return prev != nil && prev.isDone()
}

func sameRunner(a, b statelock.Holder) bool {
	switch {
	case a.Pod != nil && b.Pod != nil:
		return *a.Pod == *b.Pod
	case a.Process != nil && b.Process != nil:
		return *a.Process == *b.Process
	}
	return false
}

// lockedError is STATE_LOCKED with the holder's lock info, as terraform
// reports a held lock, plus the Landform holder when it is one of ours.
func lockedError(info statelock.LockInfo) error {
	md := map[string]string{
		"id":        info.ID,
		"who":       info.Who,
		"operation": info.Operation,
		"created":   info.Created.UTC().Format(time.RFC3339Nano),
	}
	if h, ok := statelock.ParseHolder(info); ok {
		md["holder"] = statelock.EncodeHolder(*h)
	}
	msg := fmt.Sprintf("Error acquiring the state lock: the state is locked by %s (lock %s, %s since %s)",
		info.Who, info.ID, info.Operation, info.Created.UTC().Format(time.RFC3339))
	return newError(codes.Aborted, runner.ReasonStateLocked, msg, md)
}

// leaseClient reaches the Leases of the state's namespace as the runner
// reaches the state.
func (s *Server) leaseClient(ws *workspace) (statelock.Leases, error) {
	c, ns, err := s.stateClient(ws)
	if err != nil {
		return nil, err
	}
	return c.Leases(ns), nil
}

// stateClient reaches the state's namespace as the runner reaches the
// state: with the state token, or as the kubernetes backend would (its
// kubeconfig, or the Pod's in-cluster identity).
func (s *Server) stateClient(ws *workspace) (*kubeclient.Client, string, error) {
	rc, err := s.stateConfig(ws)
	if err != nil {
		return nil, "", err
	}
	c, err := kubeclient.New(rc)
	if err != nil {
		return nil, "", err
	}
	ns := ws.backendConfig["namespace"]
	if ns == "" {
		ns = "default"
	}
	return c, ns, nil
}
