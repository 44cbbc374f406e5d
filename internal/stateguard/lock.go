package stateguard

import (
	"context"
	"errors"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/custody"
	"github.com/landform-dev/landform/internal/metrics"
	"github.com/landform-dev/landform/internal/outcome"
)

// LockHeld handles a run that found the state locked. A lock left by a
// Landform runner that is provably gone is released (by its lock id) and
// the object plans again; any other holder keeps its lock, and the
// condition names it.
func (g *Guard) LockHeld(ctx context.Context, obj *infrav1.Terraform, md map[string]string) error {
	released, err := g.releaseGoneLock(ctx, obj)
	if err != nil {
		return err
	}
	if released {
		return outcome.WaitingFor(infrav1.StateLockReleasedReason, outcome.ReplanSoon, "released the state lock %s left by a runner that is gone; planning again", OrUnknown(md["id"]))
	}
	markLocked(obj, md)
	return outcome.WaitingFor(infrav1.StateLockedReason, obj.GetRetryInterval(),
		"the state is locked by %s (lock %s, %s since %s); Landform retries until the holder releases it, or, once the holder has stopped, run `landform unlock %s -n %s` (with --force for a holder it cannot prove gone)",
		OrUnknown(md["who"]), OrUnknown(md["id"]), OrUnknown(md["operation"]), OrUnknown(md["created"]), obj.Name, obj.Namespace)
}

// RecoverLock releases the lock a lost run may have left behind.
func (g *Guard) RecoverLock(ctx context.Context, obj *infrav1.Terraform) error {
	_, err := g.releaseGoneLock(ctx, obj)
	return err
}

// releaseGoneLock releases the state lock when its holder is a Landform
// runner that is provably gone (custody.Keeper.ReleaseGoneLock), and says
// so. It reports whether it released one.
func (g *Guard) releaseGoneLock(ctx context.Context, obj *infrav1.Terraform) (bool, error) {
	held, gone, err := g.Keeper.ReleaseGoneLock(ctx, obj)
	switch {
	case errors.Is(err, custody.ErrNotOurBackend):
		return false, nil
	case err != nil:
		return false, outcome.Retry(infrav1.StateLockedReason, "%v", err)
	case held == nil:
		MarkUnlocked(obj)
	}
	if gone == nil {
		return false, nil
	}
	metrics.CountLockRecovered()
	ctrl.LoggerFrom(ctx).Info("released a state lock whose runner is gone", "lock", gone.Info.ID, "holder", gone.Info.Who, "why", gone.Why)
	g.Events.Event(obj, obj.Status.LastAttemptedRevision, corev1.EventTypeWarning, infrav1.StateLockReleasedReason,
		"released state lock %s held by %s: %s", gone.Info.ID, gone.Info.Who, gone.Why)
	return true, nil
}

// markLocked records who holds the state lock.
func markLocked(obj *infrav1.Terraform, md map[string]string) {
	obj.Status.Lock = &infrav1.LockStatus{ID: md["id"], Holder: md["who"]}
	if t, ok := lockCreated(md["created"]); ok {
		obj.Status.Lock.Since = &metav1.Time{Time: t}
	}
	conditions.MarkTrue(obj, infrav1.StateLockedCondition, infrav1.StateLockedReason,
		"state locked by %s (lock %s)", OrUnknown(md["who"]), OrUnknown(md["id"]))
}

// lockCreated reads when a lock was taken: RFC 3339 from Landform's own
// lock, Go's time format from the "Lock Info" terraform prints for a
// custom backend's lock.
func lockCreated(v string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999 -0700 MST"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// MarkUnlocked clears the lock after a run got through.
func MarkUnlocked(obj *infrav1.Terraform) {
	obj.Status.Lock = nil
	conditions.Delete(obj, infrav1.StateLockedCondition)
}

func OrUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
