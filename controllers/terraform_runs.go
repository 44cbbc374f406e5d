package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/redact"
	"github.com/landform-dev/landform/internal/runqueue"
	"github.com/landform-dev/landform/runner"
)

// errShuttingDown refuses new runs while the controller drains.
var errShuttingDown = errors.New("the controller is shutting down")

// runTracker owns the runs in flight of this controller process. A run
// lives in its own goroutine, on a context that no reconcile and no
// connection owns: reconciling starts a run or inspects it and returns, and
// the run's end brings the object back to the queue. What a successor
// needs to find a run is recorded in status.run before the run starts.
type runTracker struct {
	placer placement.Placer
	queue  *runqueue.Queue
	// drain is how long in-flight runs of non-durable runners (local
	// processes) may take to finish on shutdown before they are
	// interrupted.
	drain time.Duration
	// notify brings an object back to the reconcile queue.
	notify chan event.GenericEvent
	// collect reconciles one object outside the workqueue: during the
	// drain the workers are stopped, yet finished runs must be collected
	// before their local runners go away with this process.
	collect func(ctx context.Context, key types.NamespacedName)
	log     logr.Logger

	// ctx ends the watching of every run (not the runs): cancelled when
	// the tracker stops, after the drain, or at once with durable runners.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	runs     map[types.NamespacedName]*runHandle
	stopping bool
	wg       sync.WaitGroup
}

// runHandle is one run in flight.
type runHandle struct {
	id     string
	action string
	key    types.NamespacedName
	// redactor masks the run's secret values in everything it reports.
	redactor *redact.Redactor
	// done is closed once result and err are set.
	done   chan struct{}
	result *runner.RunResult
	err    error

	// cancel asks for the run to be interrupted gracefully.
	cancel context.CancelFunc

	// Guarded by runTracker.mu.
	rn      *placement.Run
	release func()
	// reused marks a runner handed over to a following run, so that
	// finishing this handle does not stop it.
	reused bool
}

func newRunTracker(placer placement.Placer, budget int, drain time.Duration, log logr.Logger) *runTracker {
	ctx, cancel := context.WithCancel(context.Background())
	return &runTracker{
		placer: placer,
		queue:  runqueue.New(budget),
		drain:  drain,
		notify: make(chan event.GenericEvent, 1024),
		log:    log,
		ctx:    ctx,
		cancel: cancel,
		runs:   map[types.NamespacedName]*runHandle{},
	}
}

// accepting reports whether new runs may start.
func (t *runTracker) accepting() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.stopping
}

// get returns the run in flight for key, if this process knows it.
func (t *runTracker) get(key types.NamespacedName) *runHandle {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.runs[key]
}

// lagsBehindRun reports whether obj, as read, does not record the run this
// process has in flight for it: a run is recorded in status before it is
// launched, so obj is older than that write.
func (r *TerraformReconciler) lagsBehindRun(obj *infrav1.Terraform) bool {
	h := r.runs.get(client.ObjectKeyFromObject(obj))
	return h != nil && (obj.Status.Run == nil || obj.Status.Run.ID != h.id)
}

// runner returns the identity of the runner serving h; empty while it
// waits for one.
func (t *runTracker) runner(h *runHandle) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h.rn == nil {
		return ""
	}
	return h.rn.Identity
}

// launch registers a run for key and runs fn in its own goroutine. fn
// places (or reuses, or attaches to) a runner, starts the run and watches
// it to its end.
func (t *runTracker) launch(key types.NamespacedName, id, action string, redactor *redact.Redactor, fn func(ctx context.Context, h *runHandle) (*runner.RunResult, error)) (*runHandle, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopping {
		return nil, errShuttingDown
	}
	if old := t.runs[key]; old != nil && old.id != id {
		// A run this process no longer tracks for key: the caller
		// collected it or gave it up.
		t.abandonLocked(old)
	}
	// Not derived from t.ctx: stopping to watch never interrupts a run.
	ctx, cancel := context.WithCancel(context.Background())
	h := &runHandle{id: id, action: action, key: key, redactor: redactor, done: make(chan struct{}), cancel: cancel}
	t.runs[key] = h
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		res, err := fn(ctx, h)
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
func (t *runTracker) placed(h *runHandle, rn *placement.Run, release func()) {
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
func (t *runTracker) wake(key types.NamespacedName) {
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

// finish forgets a collected run. Its runner is stopped and its slot
// given back, unless handOver is set: then the caller takes both, for a
// following run on the same runner.
func (t *runTracker) finish(h *runHandle, handOver bool) (*placement.Run, func()) {
	t.mu.Lock()
	if t.runs[h.key] == h {
		delete(t.runs, h.key)
	}
	rn, release := h.rn, h.release
	if handOver && rn != nil {
		h.reused = true
		t.mu.Unlock()
		return rn, release
	}
	t.mu.Unlock()
	h.cancel()
	t.stopRunner(h.key, rn)
	if release != nil {
		release()
	}
	return nil, nil
}

// abandon gives up the run of key: its terraform is interrupted
// gracefully (the runner gets SIGTERM, or CancelRun), and its runner
// removed, in the background.
func (t *runTracker) abandon(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.runs[key]; h != nil {
		t.abandonLocked(h)
	}
}

func (t *runTracker) abandonLocked(h *runHandle) {
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

func (t *runTracker) stopRunner(key types.NamespacedName, rn *placement.Run) {
	if rn == nil {
		return
	}
	if err := rn.Stop(); err != nil {
		t.log.Error(err, "stopping a runner", "terraform", key.String())
	}
}

// NeedLeaderElection makes the tracker stop with the controllers and
// before the leader lease is released: no other replica starts runs for
// an object while this one still drains it.
func (t *runTracker) NeedLeaderElection() bool { return true }

// Start waits for shutdown, then drains. With durable runners (Pods) it
// returns at once: the runs carry on and the next controller attaches to
// them. Local runners end with this process, so their runs get up to the
// drain timeout to finish and be collected; what remains then is
// interrupted gracefully.
func (t *runTracker) Start(ctx context.Context) error {
	<-ctx.Done()
	t.mu.Lock()
	t.stopping = true
	handles := make([]*runHandle, 0, len(t.runs))
	for _, h := range t.runs {
		handles = append(handles, h)
	}
	t.mu.Unlock()
	if t.placer.Durable() {
		t.log.Info("shutting down: runs in flight carry on in their runner Pods", "runs", len(handles))
		t.cancel()
		return nil
	}
	t.log.Info("shutting down: draining runs in flight", "runs", len(handles), "timeout", t.drain.String())
	// Runs that have no runner yet have started nothing: drop them; the
	// next controller starts them again from status.run.
	t.mu.Lock()
	for _, h := range handles {
		if h.rn == nil {
			h.cancel()
		}
	}
	t.mu.Unlock()
	deadline := time.NewTimer(t.drain)
	defer deadline.Stop()
	expired := false
	for _, h := range handles {
		select {
		case <-h.done:
		case <-deadline.C:
			expired = true
		}
		if expired {
			t.log.Info("drain timeout: interrupting a run still in flight", "terraform", h.key.String(), "run", h.id)
			h.cancel()
			<-h.done
		}
		t.collectDrained(h)
	}
	t.cancel()
	t.wg.Wait()
	return nil
}

// collectDrained collects a run that ended during the drain, so that its
// result reaches status and the outputs Secret before this process exits.
func (t *runTracker) collectDrained(h *runHandle) {
	if t.collect == nil || t.get(h.key) != h {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.collect(ctx, h.key)
}

// runnerLost is the error of a run whose runner went away before
// reporting how the run ended.
type runnerLost struct{ why string }

func (e *runnerLost) Error() string { return e.why }

func lostRunner(format string, args ...any) error {
	return &runnerLost{why: fmt.Sprintf(format, args...)}
}
