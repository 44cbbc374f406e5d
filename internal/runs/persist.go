package runs

import (
	"context"
	"time"

	"github.com/opencontainers/go-digest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/landform-dev/landform/internal/metrics"
	"github.com/landform-dev/landform/runner"
)

// keepTimeout bounds one attempt to keep a state the run could not save.
const keepTimeout = 30 * time.Second

// statePersist handles what h's runner reports of a state its engine could
// not write to the backend. The runner retries writing it; meanwhile the
// state is kept in the object's namespace as soon as the API server takes
// it (the report waits: the watch reads on once it is kept, or once this
// process stops following runs or interrupts the run: a local runner then
// leaves the state in its directory), so that it outlives a runner that
// dies or gives up. Once the runner wrote it, the kept copy goes.
func (t *Tracker) statePersist(interrupt context.Context, h *Handle, req Request, p runner.StatePersist) {
	d := digest.NewDigestFromEncoded(digest.SHA256, p.Digest)
	key := client.ObjectKeyFromObject(req.Object)
	t.mu.Lock()
	prev := h.persist
	t.mu.Unlock()
	if p.Saved {
		t.setPersist(h, StatePersist{Digest: d, Kept: prev.Kept, Saved: true})
		t.stateKept(h)
		metrics.SetStateUnsaved(key.Namespace, key.Name, false)
		if prev.Kept && t.cfg.Unsaved != nil {
			ctx, cancel := context.WithTimeout(t.ctx, keepTimeout)
			if err := t.cfg.Unsaved.Forget(ctx, req.Object, d); err != nil {
				// The next run finds it in the backend already.
				t.cfg.Log.Error(err, "forgetting the unsaved state the runner wrote", "terraform", key.String(), "run", req.Run.ID)
			}
			cancel()
		}
		t.wake(key)
		return
	}
	if prev.Digest == d && prev.Kept {
		// Sent again to a watch resumed after a broken connection.
		return
	}
	t.setPersist(h, StatePersist{Digest: d})
	metrics.SetStateUnsaved(key.Namespace, key.Name, true)
	t.cfg.Log.Info("the run could not save its state; its runner retries writing it", "terraform", key.String(), "run", req.Run.ID)
	if t.cfg.Unsaved == nil {
		t.wake(key)
		return
	}
	keeping, stop := context.WithCancel(t.ctx)
	defer stop()
	defer context.AfterFunc(interrupt, stop)()
	_ = reconnect.DelayFunc().Until(keeping, true, true, func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, keepTimeout)
		defer cancel()
		if _, err := t.cfg.Unsaved.Keep(ctx, req.Object, req.Run.ID, p.State, time.Now()); err != nil {
			t.cfg.Log.Info("keeping the unsaved state: retrying", "terraform", key.String(), "run", req.Run.ID, "error", err.Error())
			return false, nil
		}
		t.setPersist(h, StatePersist{Digest: d, Kept: true})
		t.stateKept(h)
		return true, nil
	})
	t.wake(key)
}

func (t *Tracker) setPersist(h *Handle, p StatePersist) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h.persist = p
}

// stateKept tells h's runner that its unsaved state is kept elsewhere.
func (t *Tracker) stateKept(h *Handle) {
	t.mu.Lock()
	rn := h.rn
	t.mu.Unlock()
	if rn != nil {
		rn.StateKept()
	}
}
