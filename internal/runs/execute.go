package runs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/redact"
	"github.com/landform-dev/landform/internal/runlog"
	"github.com/landform-dev/landform/runner"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

const (
	// localStartTimeout bounds the start of a local runner process.
	localStartTimeout = time.Minute
	// startRunTimeout bounds handing a run to its runner (the plan file
	// travels with an apply).
	startRunTimeout = 2 * time.Minute
	// cancelRunTimeout bounds the call that interrupts a run.
	cancelRunTimeout = 30 * time.Second
)

// reconnect spaces the attempts to hand over or resume watching a run
// whose connection broke: from a second, doubling up to ten.
var reconnect = wait.Backoff{Duration: time.Second, Factor: 2, Steps: math.MaxInt32, Cap: 10 * time.Second}

// Request is everything a run's goroutine needs. It is built by the
// reconcile and owned by the run afterwards: nothing in it is shared.
type Request struct {
	// Object is a copy of the object as recorded with the run.
	Object *infrav1.Terraform
	// Run is the run as recorded in status.run. Its Action (and Destroy)
	// is the run's: Launch copies them into Spec.
	Run infrav1.RunStatus
	// Spec is what the runner is asked for, but the action.
	Spec runner.RunSpec
	// Priority orders the run among those waiting for a slot.
	Priority Priority
	// Workspace is uploaded to a new runner; nil when the runner has it
	// (Reuse) or when attaching.
	Workspace *Workspace
	Redactor  *redact.Redactor
	// Reuse is the runner of the run before (a plan whose apply follows
	// at once) with the slot it holds.
	Reuse *Idle
}

// Workspace is the module a runner is given: the verified artifact and the
// spec for a runner whose backend settings depend on where it runs.
type Workspace struct {
	Tarball string
	Spec    func(obj *infrav1.Terraform, backend map[string]string) *runnerpb.WorkspaceSpec
}

// execute is a run's goroutine: take a slot, get a runner, hand it the run
// and watch it to its end. interrupt ends when the run is to be
// interrupted (abandoned, or the drain timed out).
func (t *Tracker) execute(interrupt context.Context, h *Handle, req Request, attach bool, rn *placement.Run, release func()) (*runner.RunResult, error) {
	var token <-chan issuedToken
	switch {
	case attach:
		var err error
		if rn, err = t.cfg.Placer.Attach(interrupt, req.Object, req.Run.ID); err != nil {
			if errors.Is(err, placement.ErrRunnerGone) {
				return nil, lost("%v", err)
			}
			return nil, &AttachError{Err: err}
		}
	case rn == nil:
		var err error
		if release, err = t.slots.Acquire(interrupt, req.Priority); err != nil {
			return nil, ErrAbandoned
		}
		// The state token is issued while the runner starts.
		token = t.issueStateToken(interrupt, req, nil)
		if rn, err = t.place(interrupt, req); err != nil {
			release()
			return nil, err
		}
	default:
		token = t.issueStateToken(interrupt, req, rn)
	}
	t.placed(h, rn, release)
	if !attach {
		if err := t.startOnRunner(interrupt, rn, req, <-token); err != nil {
			return nil, err
		}
	}
	return t.watch(interrupt, h, rn, req)
}

// issuedToken is a state token, or why there is none.
type issuedToken struct {
	token      string
	validUntil time.Time
	err        error
}

// issueStateToken issues a token of the object's state identity for req in
// the background. A runner reused from the run before keeps a token that
// is still good for this run: none is issued then.
func (t *Tracker) issueStateToken(ctx context.Context, req Request, reused *placement.Run) <-chan issuedToken {
	out := make(chan issuedToken, 1)
	if reused != nil && t.cfg.Tokens.Reusable(reused.StateTokenValidUntil, req.Spec.Deadline) {
		out <- issuedToken{validUntil: reused.StateTokenValidUntil}
		return out
	}
	go func() {
		token, validUntil, err := t.cfg.Tokens.Issue(ctx, req.Object, req.Spec.Deadline)
		out <- issuedToken{token: token, validUntil: validUntil, err: err}
	}()
	return out
}

// startOnRunner hands req to rn with its state token (an empty token keeps
// the runner's).
func (t *Tracker) startOnRunner(interrupt context.Context, rn *placement.Run, req Request, token issuedToken) error {
	if token.err != nil {
		return &StartError{Reason: infrav1.RunnerFailedReason, Err: errors.New(req.Redactor.String(token.err.Error()))}
	}
	req.Spec.StateToken = token.token
	if token.token != "" {
		rn.StateTokenValidUntil = token.validUntil
	}
	return handOver(interrupt, rn, req)
}

// Place starts a runner for req and uploads its workspace, within the
// runner start deadline, outside any slot: the caller stops it. The
// controller reads outputs through such a short-lived runner.
func (t *Tracker) Place(ctx context.Context, req Request) (*placement.Run, error) {
	return t.place(ctx, req)
}

func (t *Tracker) place(interrupt context.Context, req Request) (*placement.Run, error) {
	ctx, cancel := context.WithTimeout(interrupt, localStartTimeout)
	if t.cfg.Placer.Durable() {
		// Pods have their own start timeout (--runner-start-timeout).
		ctx, cancel = context.WithCancel(interrupt)
	}
	defer cancel()
	rn, err := t.cfg.Placer.Start(ctx, req.Object, req.Run.ID)
	var perr *placement.Error
	switch {
	case errors.As(err, &perr):
		// A failure the user can act on keeps its own reason.
		return nil, &StartError{Reason: perr.Reason, Stalling: perr.Stalling, Err: errors.New(req.Redactor.String(perr.Message))}
	case interrupt.Err() != nil:
		return nil, ErrAbandoned
	case err != nil:
		return nil, &StartError{Reason: infrav1.RunnerFailedReason, Err: fmt.Errorf("starting the runner: %s", req.Redactor.String(err.Error()))}
	}
	if req.Workspace == nil {
		return rn, nil
	}
	f, err := os.Open(req.Workspace.Tarball)
	if err != nil {
		_ = rn.Stop()
		return nil, &StartError{Reason: infrav1.ArtifactFailedReason, Err: fmt.Errorf("opening the cached artifact: %w", err)}
	}
	defer f.Close()
	if err := rn.Client.UploadWorkspace(ctx, req.Workspace.Spec(req.Object, rn.Backend), f); err != nil {
		_ = rn.Stop()
		return nil, &StartError{Err: err}
	}
	return rn, nil
}

// handOver starts the run on its runner. Starting is idempotent by run
// id, so a retry after a broken connection cannot start it twice.
func handOver(interrupt context.Context, rn *placement.Run, req Request) error {
	var failed error
	err := reconnect.DelayFunc().Until(interrupt, true, true, func(context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), startRunTimeout)
		err := rn.Client.StartRun(ctx, req.Spec)
		cancel()
		switch {
		case err == nil:
			return true, nil
		case !runner.IsWatchBroken(err):
			failed = &StartError{Err: err}
		default:
			if alive, why := rn.Alive(context.Background()); !alive {
				failed = lost("%s", why)
			}
		}
		return failed != nil, nil
	})
	switch {
	case failed != nil:
		return failed
	case err != nil:
		return ErrAbandoned
	}
	return nil
}

// watch follows the run to its end, keeping its log, and resumes where it
// left off when the connection breaks, for as long as the runner lives.
// When interrupt ends, the run is interrupted gracefully and watched until
// terraform stopped.
func (t *Tracker) watch(interrupt context.Context, h *Handle, rn *placement.Run, req Request) (*runner.RunResult, error) {
	rec := runlog.Start(context.Background(), t.cfg.Client, req.Object, phaseOf(req.Run.Action))
	debug := t.cfg.Log.V(1).WithValues("terraform", client.ObjectKeyFromObject(req.Object).String(), "run", req.Run.ID)
	var next int64
	logf := func(i int64, line string) {
		if i < next {
			return
		}
		next = i + 1
		line = req.Redactor.String(line)
		debug.Info(line)
		rec.Line(line)
	}
	stopInterrupt := context.AfterFunc(interrupt, func() {
		ctx, cancel := context.WithTimeout(context.Background(), cancelRunTimeout)
		defer cancel()
		_ = rn.Client.CancelRun(ctx, req.Run.ID)
	})
	defer stopInterrupt()

	var res *runner.RunResult
	var err error
	// Not bounded by interrupt: an interrupted run is watched until its
	// terraform stopped. Stopping to follow (t.ctx) ends the wait.
	_ = reconnect.DelayFunc().Until(t.ctx, true, true, func(context.Context) (bool, error) {
		ctx, cancel := context.WithCancel(context.Background())
		stopDetach := context.AfterFunc(t.ctx, cancel)
		res, err = rn.Client.WatchRun(ctx, req.Run.ID, next, logf, runner.OnStatePersist(func(p runner.StatePersist) { t.statePersist(interrupt, h, req, p) }))
		stopDetach()
		cancel()
		switch {
		case err == nil || !runner.IsWatchBroken(err):
			if rerr, ok := runner.AsError(err); ok && rerr.Reason == runner.ReasonUnknownRun {
				err = lost("runner %s does not know run %s (it started after the run was recorded)", rn.Identity, req.Run.ID)
			}
			return true, nil
		case t.ctx.Err() != nil:
			res, err = nil, ErrDetached
			return true, nil
		}
		if alive, why := rn.Alive(context.Background()); !alive {
			res, err = nil, lost("%s", why)
			return true, nil
		}
		return false, nil
	})
	if t.ctx.Err() != nil && err != nil && runner.IsWatchBroken(err) {
		res, err = nil, ErrDetached
	}
	// The final log is written while the result is recorded, not before:
	// one write less on the path from the engine's end to Ready. The
	// collector waits for it (AwaitLog) before it says the run ended.
	logged := make(chan struct{})
	h.logged = logged
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer close(logged)
		t.endLog(rec, err)
	}()
	return res, err
}

// endLog writes the run's final log, retrying for up to endLogWithin:
// a run that ends while the API server is away (a plan that failed on it)
// keeps its log for a person to read once it is back, instead of losing
// the lines since the last flush.
func (t *Tracker) endLog(rec *runlog.Recorder, runErr error) {
	end := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return rec.End(ctx, runErr)
	}
	// Once even when this process stops following runs.
	last := end(context.Background())
	if last != nil {
		ctx, cancel := context.WithTimeout(t.ctx, endLogWithin)
		defer cancel()
		_ = reconnect.DelayFunc().Until(ctx, false, true, func(ctx context.Context) (bool, error) {
			last = end(ctx)
			return last == nil, nil
		})
	}
	if last != nil {
		t.cfg.Log.Error(last, "keeping the run log")
	}
}

// endLogWithin bounds endLog's retries.
const endLogWithin = 3 * time.Minute

func phaseOf(action string) runlog.Phase {
	switch a := runner.Action(action); a {
	case runner.Apply, runner.Destroy:
		return runlog.Phase(a)
	}
	return runlog.PhasePlan
}
