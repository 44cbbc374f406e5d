// Package reachability wakes every Terraform object when the API server
// answers again after an outage.
//
// While the API server is away every reconcile fails, and controller-
// runtime's rate limiter backs each object off exponentially: after a
// minute of outage the next attempt of an object can be more than a minute
// after the API server is back (measured: a plan waited about 80 s). A run
// that ended meanwhile, a lock to release, an unsaved state to push: all
// wait on that backoff. The Probe asks the API server whether it is ready
// every few seconds; once it was not, for two probes in a row, the first
// ready answer calls Back, which queues every object at once (a queued
// object is processed now, whatever its backoff).
package reachability

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// DefaultEvery is how often the Probe asks.
const DefaultEvery = 5 * time.Second

// downAfter is how many failed probes in a row make an outage: one is a
// blip that costs no backoff worth waking everything for.
const downAfter = 2

// Probe asks Ready every Every and calls Back when the API server answers
// again after an outage. It is a manager.Runnable.
type Probe struct {
	// Ready returns nil when the API server is ready (GET /readyz).
	Ready func(ctx context.Context) error
	// Back is called once per outage, when it ends.
	Back  func(ctx context.Context)
	Every time.Duration
	Log   logr.Logger

	failed int
}

// Start probes until ctx ends.
func (p *Probe) Start(ctx context.Context) error {
	every := p.Every
	if every <= 0 {
		every = DefaultEvery
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) { p.probe(ctx, every) }, every)
	return nil
}

// WakeAll is a Back that queues every Terraform object objects lists,
// through to (a channel source of the controller): each is looked at
// now, not after its backoff.
func WakeAll(objects client.Reader, to chan<- event.GenericEvent) func(context.Context) {
	return func(ctx context.Context) {
		var list v1alpha1.TerraformList
		if err := objects.List(ctx, &list); err != nil {
			return
		}
		for i := range list.Items {
			select {
			case to <- event.GenericEvent{Object: &list.Items[i]}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// probe asks once, and calls Back when an outage just ended.
func (p *Probe) probe(ctx context.Context, every time.Duration) {
	rctx, cancel := context.WithTimeout(ctx, every)
	err := p.Ready(rctx)
	cancel()
	if err != nil {
		p.failed++
		if p.failed == downAfter {
			p.Log.Info("the API server does not answer; every object is queued again once it does", "error", err.Error())
		}
		return
	}
	if p.failed >= downAfter {
		p.Log.Info("the API server answers again: queueing every object")
		p.Back(ctx)
	}
	p.failed = 0
}

// NeedLeaderElection: only the leader reconciles.
func (p *Probe) NeedLeaderElection() bool { return true }
