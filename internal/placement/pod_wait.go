package placement

import (
	"context"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// podPoll spaces the reads of a Pod waited for when no watch reports it:
// from 100ms, doubling up to 2s.
var podPoll = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: math.MaxInt32, Cap: 2 * time.Second}

// watchedPoll spaces the reads of a Pod whose watch lives: only in case
// the watch stalls without ending.
const watchedPoll = 10 * time.Second

// untilPod calls check with pod as the API server last reported it (cur
// nil: it is gone; err: it could not be read) until check reports done.
//
// A watch of the one Pod (by name: the API server sends only its events)
// reports it as it is when the watch starts, then each change as it
// happens (scheduled, its container started, its container ended), and
// check takes the Pod from the watch: waiting costs the API server no
// read. Without a watch (a client that cannot watch, client.WithWatch as
// the controller builds it; a watch refused or ended) the Pod is read,
// podPoll apart; while the watch lives, only watchedPoll apart.
//
// Both were measured on the real node (`make bench-cluster`,
// docs/benchmarks.md): polling alone saw the runner container at the next
// poll, 0.15 s after it ran; reading the Pod at each of the watch's
// events cost 12 reads per runner Pod (the API server's audit log of
// every request), as many as the rest of the controller's reads of an
// object's life.
func (p *Pod) untilPod(ctx context.Context, pod *corev1.Pod, check func(cur *corev1.Pod, err error) (bool, error)) error {
	seen, stop := p.watchPod(ctx, pod)
	defer stop()
	backoff := podPoll
	if p.poll != nil {
		backoff = *p.poll
	}
	var cur *corev1.Pod
	var readErr error
	heard := false
	if seen == nil {
		cur, readErr = p.readPod(ctx, pod)
	}
	for {
		if seen == nil || heard {
			if done, err := check(cur, readErr); done || err != nil {
				return err
			}
		}
		next := backoff.Step()
		if heard && seen != nil {
			next = watchedPoll
		}
		timer := time.NewTimer(next)
		select {
		case <-ctx.Done():
			timer.Stop()
			return context.Cause(ctx)
		case c, ok := <-seen:
			timer.Stop()
			if ok {
				cur, readErr, heard = c, nil, true
				continue
			}
			seen = nil
			cur, readErr = p.readPod(ctx, pod)
		case <-timer.C:
			// Nothing heard yet (a Pod already gone sends nothing), or a
			// watch that may have stalled.
			cur, readErr = p.readPod(ctx, pod)
			heard = true
		}
	}
}

// watchPod watches pod: the channel receives the Pod at the watch's start
// and at each change (nil when it is deleted), the newest only when check
// is slower than the changes, and closes when the watch ends. A nil
// channel: the client cannot watch, or the watch was refused. The
// function stops the watch.
func (p *Pod) watchPod(ctx context.Context, pod *corev1.Pod) (<-chan *corev1.Pod, func()) {
	w, ok := p.Client.(client.WithWatch)
	if !ok {
		return nil, func() {}
	}
	watcher, err := w.Watch(ctx, &corev1.PodList{}, client.InNamespace(pod.Namespace),
		client.MatchingFields{"metadata.name": pod.Name})
	if err != nil {
		return nil, func() {}
	}
	seen := make(chan *corev1.Pod, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(seen)
		for ev := range watcher.ResultChan() {
			var cur *corev1.Pod
			switch ev.Type {
			case watch.Added, watch.Modified:
				if cur, ok = ev.Object.(*corev1.Pod); !ok {
					continue
				}
			case watch.Deleted:
			default: // an error ends the watch: the Pod is read from then on
				return
			}
			select {
			case <-seen: // not taken yet: the newest says all
			default:
			}
			seen <- cur // the only sender, and the buffer is free
		}
	}()
	return seen, func() { watcher.Stop(); <-done }
}

// readPod reads pod from the API server: nil when it is gone.
func (p *Pod) readPod(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	var cur corev1.Pod
	err := p.Client.Get(ctx, client.ObjectKeyFromObject(pod), &cur)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, fmt.Errorf("reading runner Pod %s: %w", pod.Name, err)
	}
	return &cur, nil
}
