package controllers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/redact"
	"github.com/landform-dev/landform/internal/runlog"
	"github.com/landform-dev/landform/internal/runqueue"
	"github.com/landform-dev/landform/runner"
)

const (
	// localStartTimeout bounds the start of a local runner process.
	localStartTimeout = time.Minute
	// startRunTimeout bounds handing a run to its runner (the plan file
	// travels with an apply).
	startRunTimeout = 2 * time.Minute
	// maxWatchBackoff caps the wait between attempts to resume watching a
	// run whose connection broke.
	maxWatchBackoff = 10 * time.Second
	// cancelRunTimeout bounds the call that interrupts a run.
	cancelRunTimeout = 30 * time.Second
)

// Actions recorded in status.run.
const (
	runPlan    = "plan"
	runApply   = "apply"
	runDestroy = "destroy"
)

// errAbandoned ends a run given up before it started terraform.
var errAbandoned = errors.New("the run was given up before it started")

// errDetached ends the watch of a run this process stopped following; the
// run goes on in its runner.
var errDetached = errors.New("stopped following the run")

// runRequest is everything a run's goroutine needs. It is built by the
// reconcile and owned by the run afterwards: nothing in it is shared.
type runRequest struct {
	obj      *infrav1.Terraform
	run      infrav1.RunStatus
	spec     runner.RunSpec
	priority runqueue.Priority
	// ws is the workspace to upload; nil when the runner has it already
	// (reuse) or when attaching.
	ws       *workspace
	redactor *redact.Redactor
	// reuse is the runner of the run before (a plan whose apply follows at
	// once) with the slot it holds.
	reuse   *placement.Run
	release func()
	attach  bool
}

// startRun records the run in status, writes that status, and only then
// starts it: a controller that dies at any point afterwards leaves enough
// behind for its successor to find the run.
func (r *TerraformReconciler) startRun(ctx context.Context, patcher *objectPatcher, obj *infrav1.Terraform, req runRequest) error {
	if !r.runs.accepting() {
		if req.reuse != nil {
			r.stopIdle(req.reuse, req.release)
		}
		return waiting(infrav1.ShuttingDownReason, time.Minute, "the controller is shutting down: the %s starts when it is back", req.run.Action)
	}
	if err := r.checkRunner(obj, req.redactor); err != nil {
		// Refused by the runner policy: no run is recorded or started.
		if req.reuse != nil {
			r.stopIdle(req.reuse, req.release)
		}
		return err
	}
	req.run.ID = runner.NewRunID()
	now := metav1.NewTime(r.now())
	req.run.Started = &now
	req.spec.ID = req.run.ID
	req.spec.Deadline = obj.GetTimeout()
	obj.Status.Run = req.run.DeepCopy()
	queued := inProgress(infrav1.RunQueuedReason, obj.GetTimeout(), "%s run %s queued for revision %s", req.run.Action, req.run.ID, req.run.Revision)
	// The conditions the reconcile ends with go in this one write.
	outcomeOf(queued, "").summarize(obj)
	if err := patcher.Patch(ctx, obj); err != nil {
		obj.Status.Run = nil
		if req.reuse != nil {
			r.stopIdle(req.reuse, req.release)
		}
		return fmt.Errorf("recording run %s: %w", req.run.ID, err)
	}
	req.obj = obj.DeepCopy()
	if _, err := r.runs.launch(client.ObjectKeyFromObject(obj), req.run.ID, req.run.Action, req.redactor, func(ictx context.Context, h *runHandle) (*runner.RunResult, error) {
		return r.execute(ictx, h, req)
	}); err != nil {
		// Shutting down: status.run stays, and the next controller
		// starts the run (it has no runner yet).
		if req.reuse != nil {
			r.stopIdle(req.reuse, req.release)
		}
		return waiting(infrav1.ShuttingDownReason, time.Minute, "%s run %s waits for the controller to start again", req.run.Action, req.run.ID)
	}
	return queued
}

// checkRunner asks the placement, when it can tell, whether obj's runner
// may start at all: a refusal (say, a runner image the controller does not
// allow) is a spec to fix, so it stalls before any run is recorded.
func (r *TerraformReconciler) checkRunner(obj *infrav1.Terraform, redactor *redact.Redactor) error {
	c, ok := r.Placer.(placement.Checker)
	if !ok {
		return nil
	}
	err := c.Check(obj)
	var perr *placement.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &perr) && perr.Stalling:
		return stalling(perr.Reason, "%s", redactor.String(perr.Message))
	case errors.As(err, &perr):
		return retry(perr.Reason, "%s", redactor.String(perr.Message))
	}
	return retry(infrav1.RunnerFailedReason, "checking the runner: %s", redactor.String(err.Error()))
}

// attachRun follows a run recorded in status by an earlier controller
// process, collecting its result without running terraform again.
func (r *TerraformReconciler) attachRun(ctx context.Context, obj *infrav1.Terraform) (*runHandle, error) {
	vars, err := r.renderVars(ctx, obj)
	if err != nil {
		// Without the variables' Secrets the log cannot be redacted:
		// attach once they are readable.
		return nil, err
	}
	redactor := redact.New(vars.secrets...)
	req := runRequest{obj: obj.DeepCopy(), run: *obj.Status.Run, redactor: redactor, attach: true}
	return r.runs.launch(client.ObjectKeyFromObject(obj), req.run.ID, req.run.Action, redactor, func(ictx context.Context, h *runHandle) (*runner.RunResult, error) {
		return r.execute(ictx, h, req)
	})
}

// execute is a run's goroutine: take a slot, get a runner, hand it the run
// and watch it to its end. interrupt ends when the run is to be
// interrupted (abandoned, or the drain timed out).
func (r *TerraformReconciler) execute(interrupt context.Context, h *runHandle, req runRequest) (*runner.RunResult, error) {
	rn, release := req.reuse, req.release
	var token <-chan issuedToken
	switch {
	case req.attach:
		var err error
		if rn, err = r.Placer.Attach(interrupt, req.obj, req.run.ID); err != nil {
			if errors.Is(err, placement.ErrRunnerGone) {
				return nil, lostRunner("%v", err)
			}
			return nil, &attachError{err: err}
		}
	case rn == nil:
		var err error
		if release, err = r.runs.queue.Acquire(interrupt, req.priority); err != nil {
			return nil, errAbandoned
		}
		// The state token is issued while the runner starts.
		token = r.issueStateToken(interrupt, req, nil)
		if rn, err = r.placeRunner(interrupt, req); err != nil {
			release()
			return nil, err
		}
	default:
		token = r.issueStateToken(interrupt, req, rn)
	}
	r.runs.placed(h, rn, release)
	if !req.attach {
		if err := r.startOnRunner(interrupt, rn, req, <-token); err != nil {
			return nil, err
		}
	}
	return r.watch(interrupt, rn, req)
}

// issuedToken is a state token, or why there is none.
type issuedToken struct {
	token      string
	validUntil time.Time
	err        error
}

// issueStateToken issues a token of the object's state identity for req in
// the background. A runner reused from the run before keeps its token when
// that was issued within stateTokenReuseWithin, so that it lives nearly as
// long as a new one would: none is issued then.
func (r *TerraformReconciler) issueStateToken(ctx context.Context, req runRequest, reused *placement.Run) <-chan issuedToken {
	out := make(chan issuedToken, 1)
	if reused != nil && time.Until(reused.StateTokenValidUntil) >= stateTokenLife(req.spec.Deadline)-stateTokenReuseWithin {
		out <- issuedToken{validUntil: reused.StateTokenValidUntil}
		return out
	}
	go func() {
		token, validUntil, err := r.stateToken(ctx, req.obj, req.spec.Deadline)
		out <- issuedToken{token: token, validUntil: validUntil, err: err}
	}()
	return out
}

// startOnRunner hands req to rn with its state token (an empty token keeps
// the runner's).
func (r *TerraformReconciler) startOnRunner(interrupt context.Context, rn *placement.Run, req runRequest, token issuedToken) error {
	if token.err != nil {
		return retry(infrav1.RunnerFailedReason, "%v", token.err)
	}
	req.spec.StateToken = token.token
	if token.token != "" {
		rn.StateTokenValidUntil = token.validUntil
	}
	return r.handOver(interrupt, rn, req)
}

// placeRunner starts a runner and uploads the workspace, within the
// runner start deadline.
func (r *TerraformReconciler) placeRunner(interrupt context.Context, req runRequest) (*placement.Run, error) {
	ctx, cancel := context.WithTimeout(interrupt, localStartTimeout)
	if r.Placer.Durable() {
		// Pods have their own start timeout (--runner-start-timeout).
		ctx, cancel = context.WithCancel(interrupt)
	}
	defer cancel()
	rn, err := r.Placer.Start(ctx, req.obj, req.run.ID)
	var perr *placement.Error
	switch {
	case errors.As(err, &perr) && perr.Stalling:
		return nil, stalling(perr.Reason, "%s", req.redactor.String(perr.Message))
	case errors.As(err, &perr):
		// A failure the user can act on keeps its own reason.
		return nil, retry(perr.Reason, "%s", req.redactor.String(perr.Message))
	case interrupt.Err() != nil:
		return nil, errAbandoned
	case err != nil:
		return nil, retry(infrav1.RunnerFailedReason, "starting the runner: %s", req.redactor.String(err.Error()))
	}
	if req.ws == nil {
		return rn, nil
	}
	f, err := os.Open(req.ws.tarball)
	if err != nil {
		_ = rn.Stop()
		return nil, retry(infrav1.ArtifactFailedReason, "opening the cached artifact: %v", err)
	}
	defer f.Close()
	if err := rn.Client.UploadWorkspace(ctx, workspaceSpec(req.obj, req.ws, rn.Backend), f); err != nil {
		_ = rn.Stop()
		return nil, runnerError(req.obj, req.redactor, req.run.Revision, err, infrav1.RunnerFailedReason)
	}
	return rn, nil
}

// handOver starts the run on its runner. Starting is idempotent by run
// id, so a retry after a broken connection cannot start it twice.
func (r *TerraformReconciler) handOver(interrupt context.Context, rn *placement.Run, req runRequest) error {
	backoff := time.Second
	for {
		ctx, cancel := context.WithTimeout(context.Background(), startRunTimeout)
		err := rn.Client.StartRun(ctx, req.spec)
		cancel()
		if err == nil {
			return nil
		}
		if !runner.IsWatchBroken(err) {
			return runnerError(req.obj, req.redactor, req.run.Revision, err, infrav1.RunnerFailedReason)
		}
		if alive, why := rn.Alive(context.Background()); !alive {
			return lostRunner("%s", why)
		}
		select {
		case <-interrupt.Done():
			return errAbandoned
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxWatchBackoff)
	}
}

// watch follows the run to its end, keeping its log, and resumes where it
// left off when the connection breaks, for as long as the runner lives.
// When interrupt ends, the run is interrupted gracefully and watched until
// terraform stopped.
func (r *TerraformReconciler) watch(interrupt context.Context, rn *placement.Run, req runRequest) (*runner.RunResult, error) {
	rec := runlog.Start(context.Background(), r.Client, req.obj, phaseOf(req.run.Action))
	debug := ctrl.Log.WithName("run").V(1).WithValues("terraform", client.ObjectKeyFromObject(req.obj).String(), "run", req.run.ID)
	var next int64
	logf := func(i int64, line string) {
		if i < next {
			return
		}
		next = i + 1
		line = req.redactor.String(line)
		debug.Info(line)
		rec.Line(line)
	}
	stopInterrupt := context.AfterFunc(interrupt, func() {
		ctx, cancel := context.WithTimeout(context.Background(), cancelRunTimeout)
		defer cancel()
		_ = rn.Client.CancelRun(ctx, req.run.ID)
	})
	defer stopInterrupt()

	backoff := time.Second
	for {
		ctx, cancel := context.WithCancel(context.Background())
		stopDetach := context.AfterFunc(r.runs.ctx, cancel)
		res, err := rn.Client.WatchRun(ctx, req.run.ID, next, logf)
		stopDetach()
		cancel()
		if err == nil || !runner.IsWatchBroken(err) {
			if rerr, ok := runner.AsError(err); ok && rerr.Reason == runner.ReasonUnknownRun {
				err = lostRunner("runner %s does not know run %s (it started after the run was recorded)", rn.Identity, req.run.ID)
			}
			r.endLog(rec, err)
			return res, err
		}
		if r.runs.ctx.Err() != nil {
			r.endLog(rec, errDetached)
			return nil, errDetached
		}
		if alive, why := rn.Alive(context.Background()); !alive {
			err := lostRunner("%s", why)
			r.endLog(rec, err)
			return nil, err
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, maxWatchBackoff)
	}
}

func (r *TerraformReconciler) endLog(rec *runlog.Recorder, runErr error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rec.End(ctx, runErr); err != nil {
		ctrl.Log.WithName("run").Error(err, "keeping the run log")
	}
}

// stopIdle stops a runner no run uses any more and frees its slot.
func (r *TerraformReconciler) stopIdle(rn *placement.Run, release func()) {
	if err := rn.Stop(); err != nil {
		ctrl.Log.WithName("run").Error(err, "stopping a runner")
	}
	if release != nil {
		release()
	}
}

func phaseOf(action string) runlog.Phase {
	switch action {
	case runApply:
		return runlog.PhaseApply
	case runDestroy:
		return runlog.PhaseDestroy
	}
	return runlog.PhasePlan
}

// nextCheck requeues at the next drift check, so that every path that ends
// well keeps the object on its interval. The delay is jittered, so that
// objects planned together (created together, or a new revision for all)
// do not all check for drift at the same moment again: a check that comes
// a little early finds it not due yet and requeues for the rest.
func (r *TerraformReconciler) nextCheck(obj *infrav1.Terraform) ctrl.Result {
	if obj.Spec.DisableDriftDetection {
		return ctrl.Result{RequeueAfter: r.jittered(obj.GetInterval())}
	}
	return ctrl.Result{RequeueAfter: r.jittered(max(driftCheckDue(obj, r.now()), time.Second))}
}

func (r *TerraformReconciler) jittered(d time.Duration) time.Duration {
	if r.Jitter == nil {
		return d
	}
	return r.Jitter(d)
}
