// Package runs runs Terraform runs for the controller: it takes a run slot,
// places (or reuses, or attaches to) a runner, hands it the workspace, the
// state token and the run, follows the run to its end while keeping its
// log, and keeps a plan's runner for the apply that follows. The reconciler
// decides which run to start and what an ended run means; this package only
// runs them, each in its own goroutine on a context no reconcile and no
// connection owns, and wakes the object when there is news.
package runs

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/opencontainers/go-digest"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/redact"
	"github.com/landform-dev/landform/runner"
)

// StateTokens issue tokens of an object's state identity for its runs.
type StateTokens interface {
	// Issue returns a token for a run of obj with the given deadline, and
	// until when it is valid.
	Issue(ctx context.Context, obj *infrav1.Terraform, deadline time.Duration) (string, time.Time, error)
	// Reusable reports whether a token valid until validUntil still serves
	// a run with the given deadline (a reused runner keeps its token).
	Reusable(validUntil time.Time, deadline time.Duration) bool
}

// UnsavedStates keep the states that runs could not write to their
// backend (internal/unsavedstate).
type UnsavedStates interface {
	// Keep keeps data, the state run could not save, for obj.
	Keep(ctx context.Context, obj *infrav1.Terraform, run string, data []byte, now time.Time) (digest.Digest, error)
	// Forget drops obj's kept state if it is the one of digest d.
	Forget(ctx context.Context, obj *infrav1.Terraform, d digest.Digest) error
}

// Config is what the tracker needs.
type Config struct {
	Placer placement.Placer
	Tokens StateTokens
	// Unsaved keeps what a run reports of a state it could not save, as
	// soon as the API server takes it; nil keeps nothing.
	Unsaved UnsavedStates
	// Client keeps the run logs (internal/runlog).
	Client client.Client
	// Slots bounds the runs in flight (0: DefaultSlots).
	Slots int
	// Drain is how long in-flight runs of non-durable runners (local
	// processes) may take to finish on shutdown before they are
	// interrupted (0: DefaultDrain).
	Drain time.Duration
	// Collect reconciles one object outside the workqueue: during the
	// drain the workers are stopped, yet finished runs must be collected
	// before their local runners go away with this process.
	Collect reconcile.Reconciler
	Log     logr.Logger
}

// Defaults of Config.
const (
	DefaultSlots = 10
	DefaultDrain = 15 * time.Minute
)

// Tracker owns the runs in flight of this controller process. What a
// successor needs to find a run is recorded in status.run by the caller
// before it launches the run.
type Tracker struct {
	cfg    Config
	slots  *Slots
	notify chan event.GenericEvent

	// ctx ends the watching of every run (not the runs): cancelled when
	// the tracker stops, after the drain, or at once with durable runners.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	runs     map[types.NamespacedName]*Handle
	stopping bool
	wg       sync.WaitGroup
	// stops are the runners of finished runs being stopped (Finish).
	stops sync.WaitGroup
}

// Handle is one run in flight.
type Handle struct {
	id     string
	action string
	// inputsDigest is the workspace the run's runner holds.
	inputsDigest string
	key          types.NamespacedName
	// redactor masks the run's secret values in everything it reports.
	redactor *redact.Redactor
	// done is closed once result and err are set.
	done   chan struct{}
	result *runner.RunResult
	err    error
	// logged, set before done is closed, is closed once the run's final
	// log is written or given up; nil when the run was never watched.
	logged chan struct{}

	// cancel asks for the run to be interrupted gracefully.
	cancel context.CancelFunc

	// Guarded by Tracker.mu.
	rn      *placement.Run
	release func()
	// reused marks a runner handed over to a following run, so that
	// finishing this handle does not stop it.
	reused bool
	// persist is what the run reported of a state it could not save.
	persist StatePersist
	// interrupted: Interrupt asked the runner to stop the run.
	interrupted bool
}

// StatePersist is what a run reported of a state its engine could not
// write to the backend: zero when it reported none.
type StatePersist struct {
	// Digest is the state's.
	Digest digest.Digest
	// Kept is set once the state is kept in the object's namespace.
	Kept bool
	// Saved is set once the runner wrote it to the backend.
	Saved bool
}

// ID is the run's id, as recorded in status.run.
func (h *Handle) ID() string { return h.id }

// Done is closed when the run ended.
func (h *Handle) Done() <-chan struct{} { return h.done }

// Result is how the run ended; valid once Done is closed.
func (h *Handle) Result() (*runner.RunResult, error) { return h.result, h.err }

// AwaitLog waits, once Done is closed, until the run's final log is
// written, for at most max: with the API server away the log goes on
// trying on its own (endLogWithin), and the collection must not wait for
// it that long. It reports whether the log was written (or given up).
func (h *Handle) AwaitLog(max time.Duration) bool {
	if h.logged == nil {
		return true
	}
	timer := time.NewTimer(max)
	defer timer.Stop()
	select {
	case <-h.logged:
		return true
	case <-timer.C:
		return false
	}
}

// Redactor masks the run's secret values.
func (h *Handle) Redactor() *redact.Redactor { return h.redactor }

// StatePersist returns what the run of h reported of a state it could not
// save.
func (t *Tracker) StatePersist(h *Handle) StatePersist {
	t.mu.Lock()
	defer t.mu.Unlock()
	return h.persist
}

// New returns a tracker; add it to the manager so that it drains on
// shutdown.
func New(cfg Config) *Tracker {
	cfg.Slots = cmp.Or(max(cfg.Slots, 0), DefaultSlots)
	cfg.Drain = cmp.Or(max(cfg.Drain, 0), DefaultDrain)
	ctx, cancel := context.WithCancel(context.Background())
	return &Tracker{
		cfg:    cfg,
		slots:  NewSlots(cfg.Slots),
		notify: make(chan event.GenericEvent, 1024),
		ctx:    ctx,
		cancel: cancel,
		runs:   map[types.NamespacedName]*Handle{},
	}
}

// Events brings objects back to the reconcile queue: a run's progress
// (once it has gone progressAfter) and its end.
func (t *Tracker) Events() <-chan event.GenericEvent { return t.notify }

// Accepting reports whether new runs may start.
func (t *Tracker) Accepting() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.stopping
}

// Get returns the run in flight for key, if this process knows it.
func (t *Tracker) Get(key types.NamespacedName) *Handle {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.runs[key]
}

// Runner returns the identity of the runner serving h; empty while it
// waits for one.
func (t *Tracker) Runner(h *Handle) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h.rn == nil {
		return ""
	}
	return h.rn.Identity
}

// Launch starts req's run: a slot, a runner (req.Reuse's, or a new one
// given req.Workspace), its state token and the run, followed to its end.
// It fails only with ErrShuttingDown; req.Reuse is stopped then.
func (t *Tracker) Launch(req Request) (*Handle, error) {
	return t.launch(req, false)
}

// Attach follows a run recorded in status by an earlier controller
// process, collecting its result without running terraform again.
func (t *Tracker) Attach(req Request) (*Handle, error) {
	return t.launch(req, true)
}

func (t *Tracker) launch(req Request, attach bool) (*Handle, error) {
	req.Spec.Action, req.Spec.Destroy = runner.Action(req.Run.Action), req.Run.Destroy
	key := client.ObjectKeyFromObject(req.Object)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopping {
		req.Reuse.Stop()
		return nil, ErrShuttingDown
	}
	if old := t.runs[key]; old != nil && old.id != req.Run.ID {
		// A run this process no longer tracks for key: the caller
		// collected it or gave it up.
		t.abandonLocked(old)
	}
	var reuse *placement.Run
	var release func()
	if req.Reuse != nil {
		reuse, release = req.Reuse.take()
	}
	// Not derived from t.ctx: stopping to watch never interrupts a run.
	ctx, cancel := context.WithCancel(context.Background())
	h := &Handle{id: req.Run.ID, action: req.Run.Action, inputsDigest: req.Run.InputsDigest, key: key, redactor: req.Redactor, done: make(chan struct{}), cancel: cancel}
	t.runs[key] = h
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		res, err := t.execute(ctx, h, req, attach, reuse, release)
		h.result, h.err = res, err
		close(h.done)
		t.wake(key)
	}()
	return h, nil
}

// progressAfter is how long a placed run goes before its object is woken
// to say on which runner it is in progress. A run that ends sooner is told
// once, by its end: a status write less per run.
const progressAfter = time.Second

// placed records the runner of h, and the run slot it holds.
func (t *Tracker) placed(h *Handle, rn *placement.Run, release func()) {
	t.mu.Lock()
	h.rn, h.release = rn, release
	t.mu.Unlock()
	go func() {
		timer := time.NewTimer(progressAfter)
		defer timer.Stop()
		select {
		case <-timer.C:
			t.wake(h.key)
		case <-h.done:
		case <-t.ctx.Done():
		}
	}()
}

// wake brings key back to the reconcile queue.
func (t *Tracker) wake(key types.NamespacedName) {
	obj := &infrav1.Terraform{}
	obj.Namespace, obj.Name = key.Namespace, key.Name
	select {
	case t.notify <- event.GenericEvent{Object: obj}:
	default:
		// The queue is full of wake-ups already; send without holding
		// up the run.
		go func() {
			select {
			case t.notify <- event.GenericEvent{Object: obj}:
			case <-t.ctx.Done():
			}
		}()
	}
}

// Finish forgets a collected run: call it once the run is done, on every
// path. Its runner is stopped and its slot given back, unless the run was
// a plan that succeeded on a runner: then the caller gets both as an Idle
// runner holding the plan's workspace, for the apply that may follow at
// once, and must pass it to Launch or stop it.
//
// The runner is stopped in the background, its slot given back once it
// is gone: a local runner's stop waits for the process to exit and its
// directory to be removed (about 15 ms in `make bench`, on the path from
// the apply's end to Ready), and nothing the collection does needs the
// runner. A runner kept for another run when stopped (KeptOnStop: a
// runner Pod with reuse) is stopped before Finish returns, so that the
// next object's run finds it kept once this one is Ready.
func (t *Tracker) Finish(h *Handle) *Idle {
	t.mu.Lock()
	if t.runs[h.key] == h {
		delete(t.runs, h.key)
	}
	rn, release := h.rn, h.release
	if runner.Action(h.action) == runner.Plan && h.err == nil && rn != nil {
		h.reused = true
		t.mu.Unlock()
		return &Idle{rn: rn, release: release, inputsDigest: h.inputsDigest, log: t.logStop(h.key)}
	}
	t.mu.Unlock()
	h.cancel()
	stop := func() {
		t.stopRunner(h.key, rn)
		if release != nil {
			release()
		}
	}
	if rn == nil || rn.KeptOnStop {
		stop()
		return nil
	}
	t.stops.Add(1)
	go func() {
		defer t.stops.Done()
		stop()
	}()
	return nil
}

// Abandon gives up the run of key: its terraform is interrupted
// gracefully (the runner gets SIGTERM, or CancelRun), and its runner
// removed, in the background.
func (t *Tracker) Abandon(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.runs[key]; h != nil {
		t.abandonLocked(h)
	}
}

// Interrupt asks the run id of key to stop gracefully (CancelRun:
// terraform finishes the operations in flight and writes its state) and
// goes on following it: its end, a state it could not save and its log
// are collected like any run's. deletionPolicy Orphan uses it for an
// apply or destroy, so that the state the interrupted run writes last
// reaches the backend before the object lets go of its state identity;
// Abandon would stop keeping that state at once. A run not on a runner
// yet has written nothing: it is abandoned. It reports whether it asked
// (false: no such run here, or asked before).
func (t *Tracker) Interrupt(key types.NamespacedName, id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.runs[key]
	if h == nil || h.id != id || h.interrupted {
		return false
	}
	h.interrupted = true
	rn := h.rn
	if rn == nil {
		t.abandonLocked(h)
		return true
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), cancelRunTimeout)
		defer cancel()
		if err := rn.Client.CancelRun(ctx, id); err != nil {
			t.cfg.Log.Info("interrupting the run: its runner did not take the cancel; the run ends at its deadline", "terraform", key.String(), "run", id, "error", err.Error())
		}
	}()
	return true
}

func (t *Tracker) abandonLocked(h *Handle) {
	delete(t.runs, h.key)
	h.cancel()
	rn, release := h.rn, h.release
	go func() {
		<-h.done
		if !h.reused {
			t.stopRunner(h.key, rn)
		}
		if release != nil {
			release()
		}
	}()
}

func (t *Tracker) stopRunner(key types.NamespacedName, rn *placement.Run) {
	if rn == nil {
		return
	}
	if err := rn.Stop(); err != nil {
		t.logStop(key)(err)
	}
}

func (t *Tracker) logStop(key types.NamespacedName) func(error) {
	return func(err error) { t.cfg.Log.Error(err, "stopping a runner", "terraform", key.String()) }
}

// NeedLeaderElection makes the tracker stop with the controllers and
// before the leader lease is released: no other replica starts runs for
// an object while this one still drains it.
func (t *Tracker) NeedLeaderElection() bool { return true }

// Start waits for shutdown, then drains. With durable runners (Pods) it
// returns at once: the runs carry on and the next controller attaches to
// them. Local runners end with this process, so their runs get up to the
// drain timeout to finish and be collected; what remains then is
// interrupted gracefully.
func (t *Tracker) Start(ctx context.Context) error {
	<-ctx.Done()
	t.mu.Lock()
	t.stopping = true
	handles := make([]*Handle, 0, len(t.runs))
	for _, h := range t.runs {
		handles = append(handles, h)
	}
	t.mu.Unlock()
	if t.cfg.Placer.Durable() {
		t.cfg.Log.Info("shutting down: runs in flight carry on in their runner Pods", "runs", len(handles))
		t.cancel()
		// The runners of runs that ended are stopped, not left to idle.
		t.stops.Wait()
		return nil
	}
	t.cfg.Log.Info("shutting down: draining runs in flight", "runs", len(handles), "timeout", t.cfg.Drain.String())
	// Runs that have no runner yet have started nothing: drop them; the
	// next controller starts them again from status.run.
	t.mu.Lock()
	for _, h := range handles {
		if h.rn == nil {
			h.cancel()
		}
	}
	t.mu.Unlock()
	deadline := time.NewTimer(t.cfg.Drain)
	defer deadline.Stop()
	expired := false
	for _, h := range handles {
		if !expired {
			select {
			case <-h.done:
			case <-deadline.C:
				// Every run still in flight is interrupted now, not
				// only this one: the deadline fires once.
				expired = true
			}
		}
		if expired {
			t.cfg.Log.Info("drain timeout: interrupting a run still in flight", "terraform", h.key.String(), "run", h.id)
			h.cancel()
			<-h.done
		}
		t.collectDrained(h)
	}
	t.cancel()
	t.wg.Wait()
	t.stops.Wait()
	return nil
}

// collectDrained collects a run that ended during the drain, so that its
// result reaches status and the outputs Secret before this process exits.
func (t *Tracker) collectDrained(h *Handle) {
	if t.cfg.Collect == nil || t.Get(h.key) != h {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _ = t.cfg.Collect.Reconcile(ctx, reconcile.Request{NamespacedName: h.key})
}

// Behind reports whether obj, as read, does not record the run this
// process has in flight for it: a run is recorded in status before it is
// launched, so obj is older than that write (a cache that has not caught
// up), and acting on it would take that run for another process's.
func (t *Tracker) Behind(obj *infrav1.Terraform) bool {
	h := t.Get(client.ObjectKeyFromObject(obj))
	return h != nil && (obj.Status.Run == nil || obj.Status.Run.ID != h.ID())
}
