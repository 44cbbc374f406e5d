package source

import (
	"context"
	"sync"
)

// keyedMutex is one mutex per key whose Lock honours a context, so that a
// caller whose reconcile times out stops waiting for another's download.
// Entries are dropped when nobody holds or waits for them.
type keyedMutex struct {
	mu      sync.Mutex
	entries map[string]*keyedEntry
}

type keyedEntry struct {
	held chan struct{} // holds one token while locked
	refs int
}

func (k *keyedMutex) acquireRef(key string) *keyedEntry {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.entries == nil {
		k.entries = map[string]*keyedEntry{}
	}
	e := k.entries[key]
	if e == nil {
		e = &keyedEntry{held: make(chan struct{}, 1)}
		k.entries[key] = e
	}
	e.refs++
	return e
}

func (k *keyedMutex) releaseRef(key string, e *keyedEntry) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e.refs--; e.refs == 0 {
		delete(k.entries, key)
	}
}

// lock waits for key's mutex or ctx and returns the function that unlocks it.
func (k *keyedMutex) lock(ctx context.Context, key string) (func(), error) {
	e := k.acquireRef(key)
	select {
	case e.held <- struct{}{}:
		return func() { <-e.held; k.releaseRef(key, e) }, nil
	case <-ctx.Done():
		k.releaseRef(key, e)
		return nil, ctx.Err()
	}
}

// tryLock takes key's mutex only if it is free.
func (k *keyedMutex) tryLock(key string) (func(), bool) {
	e := k.acquireRef(key)
	select {
	case e.held <- struct{}{}:
		return func() { <-e.held; k.releaseRef(key, e) }, true
	default:
		k.releaseRef(key, e)
		return nil, false
	}
}
