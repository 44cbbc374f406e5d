package placement

import (
	"context"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// podPoll spaces the reads of a Pod being started when nothing wakes them
// sooner: from 100ms, doubling up to 2s.
var podPoll = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: math.MaxInt32, Cap: 2 * time.Second}

// untilPod calls check until it reports done, a watch of the one Pod
// waking it as soon as the API server has news of it (scheduled, its
// container started, its container ended), and podPoll's timer otherwise.
//
// Polling alone was measured on the real node (`make bench-cluster`,
// docs/benchmarks.md): the runner container ran about 0.55 s after the
// Pod was created, and the poll at 0.7 s saw it, 0.15 s lost on every
// run, more under load, while the run held its slot. The watch is by name
// (a field selector), so the API server sends only this Pod's events; it
// needs a Client that can watch (client.WithWatch, as the controller
// builds it). When it cannot, or the watch ends, the timer still runs:
// the wait is never longer than polling's.
func (p *Pod) untilPod(ctx context.Context, pod *corev1.Pod, check func(context.Context) (bool, error)) error {
	woken, stop := p.watchPod(ctx, pod)
	defer stop()
	backoff := podPoll
	if p.poll != nil {
		backoff = *p.poll
	}
	for {
		if done, err := check(ctx); done || err != nil {
			return err
		}
		timer := time.NewTimer(backoff.Step())
		select {
		case <-ctx.Done():
			timer.Stop()
			return context.Cause(ctx)
		case <-woken:
			timer.Stop()
		case <-timer.C:
		}
	}
}

// watchPod returns a channel that receives when the API server reports a
// change of pod, and a function that stops the watch. The channel never
// receives when the client cannot watch or the watch fails.
func (p *Pod) watchPod(ctx context.Context, pod *corev1.Pod) (<-chan struct{}, func()) {
	woken := make(chan struct{}, 1)
	w, ok := p.Client.(client.WithWatch)
	if !ok {
		return woken, func() {}
	}
	watcher, err := w.Watch(ctx, &corev1.PodList{}, client.InNamespace(pod.Namespace),
		client.MatchingFields{"metadata.name": pod.Name})
	if err != nil {
		return woken, func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range watcher.ResultChan() {
			select {
			case woken <- struct{}{}:
			default: // one wake-up pending is enough: check reads the Pod
			}
		}
	}()
	return woken, func() { watcher.Stop(); <-done }
}
