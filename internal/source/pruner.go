package source

import (
	"context"
	"time"

	"github.com/go-logr/logr"
)

// DefaultPruneInterval is Pruner.Interval when none is set.
const DefaultPruneInterval = 10 * time.Minute

// Pruner keeps a Fetcher's cache within Options, pruning it when started and
// every Interval after. It is a controller-runtime manager.Runnable that
// runs on every replica, leader or not: each has its own cache.
type Pruner struct {
	// Fetcher owns the cache.
	Fetcher *Fetcher
	// Interval is the time between two prunes; DefaultPruneInterval when
	// zero or negative.
	Interval time.Duration
	// Options bound the cache.
	Options PruneOptions
	// Log receives what each prune removed.
	Log logr.Logger
}

// Start prunes now and every Interval until ctx ends. A failed prune is
// logged and tried again on the next tick: stopping the manager for it
// would be worse than a cache that is briefly too large.
func (p *Pruner) Start(ctx context.Context) error {
	interval := p.Interval
	if interval <= 0 {
		interval = DefaultPruneInterval
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		p.prune()
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// NeedLeaderElection is false: every replica prunes its own cache.
func (p *Pruner) NeedLeaderElection() bool { return false }

func (p *Pruner) prune() {
	res, err := p.Fetcher.Prune(p.Options)
	kv := []any{"removed", res.Removed, "freedBytes", res.FreedBytes, "remainingBytes", res.RemainingBytes}
	switch {
	case err != nil:
		p.Log.Error(err, "pruning the artifact cache", kv...)
	case res.Removed > 0 || res.FreedBytes > 0:
		p.Log.Info("pruned the artifact cache", kv...)
	default:
		p.Log.V(1).Info("artifact cache within bounds", kv...)
	}
	if err == nil && p.Options.MaxSize > 0 && res.RemainingBytes > p.Options.MaxSize {
		p.Log.Info("the artifact cache stays above its size bound: what is left is in use or was used recently",
			append(kv, "maxSize", p.Options.MaxSize, "minAge", p.Options.minAge())...)
	}
}
