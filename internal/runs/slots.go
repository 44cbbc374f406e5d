package runs

import (
	"context"
	"sync"
)

// Priority orders waiting runs.
type Priority int

const (
	// Background is for drift checks: nobody is waiting for them.
	Background Priority = iota
	// User is for everything a person or a change is waiting for.
	User
)

// Slots bound the runs in flight. A run takes a slot before its runner
// starts and gives it back when its result is collected; runs beyond the
// budget wait, user actions (approvals, requested reconciles, new objects,
// deletions) ahead of drift checks, first come first served within each
// class.
//
// The budget is separate from the reconcile workers (--concurrent): a
// reconcile only starts or inspects a run and returns, so objects that need
// only a decision are never queued behind long applies.
type Slots struct {
	mu      sync.Mutex
	free    int
	size    int
	waiting [2][]*waiter // by priority
}

type waiter struct {
	ready   chan struct{}
	granted bool
}

// NewSlots returns size slots (at least one).
func NewSlots(size int) *Slots {
	size = max(size, 1)
	return &Slots{free: size, size: size}
}

// Acquire waits for a slot and returns the function that gives it back
// (safe to call more than once). It fails only when ctx ends first.
func (q *Slots) Acquire(ctx context.Context, p Priority) (func(), error) {
	p = min(max(p, Background), User)
	q.mu.Lock()
	if q.free > 0 && len(q.waiting[User]) == 0 && (p == User || len(q.waiting[Background]) == 0) {
		q.free--
		q.mu.Unlock()
		return q.releaser(), nil
	}
	w := &waiter{ready: make(chan struct{})}
	q.waiting[p] = append(q.waiting[p], w)
	q.mu.Unlock()

	select {
	case <-w.ready:
		return q.releaser(), nil
	case <-ctx.Done():
		q.mu.Lock()
		defer q.mu.Unlock()
		if w.granted {
			// Granted while giving up: pass the slot on.
			q.releaseLocked()
		} else {
			q.remove(p, w)
		}
		return nil, ctx.Err()
	}
}

// Stats reports the slots in use and the runs waiting.
func (q *Slots) Stats() (inUse, waiting int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.size - q.free, len(q.waiting[User]) + len(q.waiting[Background])
}

func (q *Slots) releaser() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			q.mu.Lock()
			defer q.mu.Unlock()
			q.releaseLocked()
		})
	}
}

// releaseLocked gives a slot to the first waiter of the highest priority,
// or back to the pool.
func (q *Slots) releaseLocked() {
	for p := User; p >= Background; p-- {
		if len(q.waiting[p]) > 0 {
			w := q.waiting[p][0]
			q.waiting[p] = q.waiting[p][1:]
			w.granted = true
			close(w.ready)
			return
		}
	}
	q.free++
}

func (q *Slots) remove(p Priority, w *waiter) {
	for i, x := range q.waiting[p] {
		if x == w {
			q.waiting[p] = append(q.waiting[p][:i], q.waiting[p][i+1:]...)
			return
		}
	}
}
