package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// The milestones a timeline records from Pods, by sample. A runner Pod's
// sample is the Terraform object owning it; a raw engine Pod is its own.
const (
	msPodCreated   = "pod created"
	msPodScheduled = "pod scheduled"
	msRunning      = "container running"
	msExited       = "container terminated"
	msSucceeded    = "pod succeeded"
	msFailed       = "pod failed"
	msPodGone      = "pod gone"
)

// eventMilestone is the milestone of an Event of a Terraform object.
func eventMilestone(reason string) string { return "event " + reason }

// timeline records, from watches, when the harness first saw each
// milestone of each sample (key "namespace/name") in the bench's namespace:
// its Pods' creation, scheduling, container states and deletion, and the
// Events of its Terraform object. Watches, not the API's timestamps: the
// Pod's conditions and the Events' first timestamps are whole seconds.
// It also counts the namespace's Pods, and the Pods created elsewhere,
// which tell whether other work shared the node.
type timeline struct {
	ns string

	mu      sync.Mutex
	changed chan struct{}
	at      map[string]map[string]time.Time
	live    map[string]bool // uid of the namespace's Pods not yet gone
	maxLive int
	created int
	others  int // Pods created in other namespaces since start
	started time.Time
}

func newTimeline(ns string) *timeline {
	return &timeline{ns: ns, changed: make(chan struct{}), at: map[string]map[string]time.Time{}, live: map[string]bool{}}
}

// start watches Pods everywhere and Events in the namespace until ctx ends.
func (t *timeline) start(ctx context.Context, c client.WithWatch) {
	t.started = time.Now()
	go watchAll(ctx, c, &corev1.PodList{}, "", func(typ watch.EventType, o client.Object) { t.pod(typ, o.(*corev1.Pod)) })
	go watchAll(ctx, c, &corev1.EventList{}, t.ns, func(typ watch.EventType, o client.Object) {
		if typ != watch.Deleted {
			t.event(o.(*corev1.Event))
		}
	})
}

// sampleOf is the sample a Pod of the namespace belongs to: the Terraform
// object owning it, else the Pod itself.
func sampleOf(pod *corev1.Pod) string {
	for _, o := range pod.OwnerReferences {
		if o.Kind == infrav1.TerraformKind {
			return pod.Namespace + "/" + o.Name
		}
	}
	return pod.Namespace + "/" + pod.Name
}

// podMilestones are the milestones a Pod's state shows.
func podMilestones(pod *corev1.Pod) []string {
	ms := []string{msPodCreated}
	if pod.Spec.NodeName != "" {
		ms = append(ms, msPodScheduled)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running != nil {
			ms = append(ms, msRunning)
		}
		if cs.State.Terminated != nil {
			ms = append(ms, msRunning, msExited)
		}
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		ms = append(ms, msSucceeded)
	case corev1.PodFailed:
		ms = append(ms, msFailed)
	}
	return ms
}

func (t *timeline) pod(typ watch.EventType, pod *corev1.Pod) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	defer t.notify()
	if pod.Namespace != t.ns {
		if typ == watch.Added && pod.CreationTimestamp.After(t.started.Add(-time.Second)) {
			t.others++
		}
		return
	}
	key := sampleOf(pod)
	uid := string(pod.UID)
	if typ == watch.Deleted {
		delete(t.live, uid)
		t.mark(key, msPodGone, now)
		return
	}
	if !t.live[uid] && typ == watch.Added {
		t.created++
	}
	t.live[uid] = true
	t.maxLive = max(t.maxLive, len(t.live))
	for _, m := range podMilestones(pod) {
		t.mark(key, m, now)
	}
}

func (t *timeline) event(ev *corev1.Event) {
	if ev.InvolvedObject.Kind != infrav1.TerraformKind {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mark(ev.InvolvedObject.Namespace+"/"+ev.InvolvedObject.Name, eventMilestone(ev.Reason), now)
	t.notify()
}

// mark records the milestone the first time it is seen; t.mu is held.
func (t *timeline) mark(key, milestone string, at time.Time) {
	if t.at[key] == nil {
		t.at[key] = map[string]time.Time{}
	}
	if _, seen := t.at[key][milestone]; !seen {
		t.at[key][milestone] = at
	}
}

func (t *timeline) notify() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// get is when the milestone of key was first seen; zero if not yet.
func (t *timeline) get(key, milestone string) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.at[key][milestone]
}

// waitAny waits until key has one of milestones, and returns which.
func (t *timeline) waitAny(ctx context.Context, key string, milestones ...string) (string, error) {
	for {
		t.mu.Lock()
		for _, m := range milestones {
			if _, ok := t.at[key][m]; ok {
				t.mu.Unlock()
				return m, nil
			}
		}
		ch := t.changed
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for %s to reach %v: %w", key, milestones, ctx.Err())
		}
	}
}

// waitNoPods waits until the namespace has no Pod left.
func (t *timeline) waitNoPods(ctx context.Context) error {
	for {
		t.mu.Lock()
		n := len(t.live)
		ch := t.changed
		t.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the %d Pods of namespace %s to go: %w", n, t.ns, ctx.Err())
		}
	}
}

// liveCount is the namespace's Pods not yet gone.
func (t *timeline) liveCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.live)
}

// podCounts returns the namespace's Pods created so far, the most that
// existed at once since the last call, and the Pods created in other
// namespaces so far; it resets the most at once to the Pods live now.
func (t *timeline) podCounts() (created, maxLive, others int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	created, maxLive, others = t.created, t.maxLive, t.others
	t.maxLive = len(t.live)
	return created, maxLive, others
}
