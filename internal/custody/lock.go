package custody

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/statelock"
)

// GoneLock is a state lock ReleaseGoneLock released: its holder, and how
// it was proved gone.
type GoneLock struct {
	Info statelock.LockInfo
	Why  string
}

// ReleaseGoneLock reads obj's state lock and releases it, by its lock id,
// when its holder is a Landform runner (or controller) that is provably
// gone. It returns the lock still held (nil when the state is free or was
// just freed) and the lock it released (nil when none). A custom
// backend's lock is not Landform's to read: ErrNotOurBackend.
func (k *Keeper) ReleaseGoneLock(ctx context.Context, obj *v1alpha1.Terraform) (held *statelock.LockInfo, released *GoneLock, err error) {
	if CustomBackend(obj) || k.Leases == nil {
		return nil, nil, ErrNotOurBackend
	}
	leases := k.Leases(obj.Namespace)
	name := names.StateLease(obj)
	info, err := statelock.Read(ctx, leases, name)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the state lock %s/%s: %w", obj.Namespace, name, err)
	}
	if info == nil {
		return nil, nil, nil
	}
	holder, ok := statelock.ParseHolder(*info)
	if !ok {
		return info, nil, nil
	}
	gone, why := k.holderGone(ctx, obj, holder)
	if !gone {
		return info, nil, nil
	}
	if err := statelock.Release(ctx, leases, name, info.ID); err != nil {
		return info, nil, fmt.Errorf("releasing the state lock %s left by %s (%s): %w", info.ID, info.Who, why, err)
	}
	return nil, &GoneLock{Info: *info, Why: why}, nil
}

// holderGone proves a Landform runner gone: its Pod (in obj's namespace)
// deleted, replaced or terminated, or its local process no longer
// running. Anything that cannot be proved (an unreadable Pod, a process
// on another host) is alive.
func (k *Keeper) holderGone(ctx context.Context, obj *v1alpha1.Terraform, h *statelock.Holder) (bool, string) {
	switch {
	case h.Pod != nil:
		if gone, how, _, err := h.Pod.Look(ctx, k.getPod, obj.Namespace); err == nil && gone {
			return true, fmt.Sprintf("its runner Pod %s/%s %s", h.Pod.Namespace, h.Pod.Name, how)
		}
		return false, ""
	case h.Process != nil:
		return h.Process.Gone()
	}
	return false, ""
}

// getPod reads a Pod straight from the API server (k.Reader).
func (k *Keeper) getPod(ctx context.Context, key types.NamespacedName, pod *corev1.Pod) error {
	return k.Reader.Get(ctx, key, pod)
}

// controllerHolder is who the controller takes a state lock as: this
// process, which a restarted controller on the same host can prove gone.
var controllerHolder = sync.OnceValues(func() (statelock.Holder, error) {
	proc, err := statelock.CurrentProcess()
	if err != nil {
		return statelock.Holder{}, fmt.Errorf("identifying the controller process for the state lock: %w", err)
	}
	return statelock.Holder{Run: "state-push", Tool: "landform-controller", Process: proc}, nil
})
