package main

import (
	"context"
	"sync"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// runSeen is one run seen starting on an object.
type runSeen struct {
	key    string
	id     string
	action string
	drift  bool
	at     time.Time
	// started is status.run.started, by the controller's clock: unlike
	// at, free of the watch's lag on a loaded machine.
	started time.Time
}

// tracker follows Terraform objects and Secrets through watches and keeps
// when each object first settled at each revision, when each outputs
// Secret appeared, and every run recorded in status.
type tracker struct {
	mu      sync.Mutex
	changed chan struct{}
	// settled[key][revision] is when the object was first seen Ready at
	// its generation, with no run in flight, with revision applied.
	settled map[string]map[string]time.Time
	outputs map[string]time.Time // outputs Secret key -> first seen with both outputs
	runIDs  map[string]bool
	runs    []runSeen
}

func newTracker() *tracker {
	return &tracker{
		changed: make(chan struct{}),
		settled: map[string]map[string]time.Time{},
		outputs: map[string]time.Time{},
		runIDs:  map[string]bool{},
	}
}

// start watches Terraform objects and Secrets in namespace ns (every
// namespace for "") until ctx ends.
func (t *tracker) start(ctx context.Context, c client.WithWatch, ns string) {
	go watchAll(ctx, c, &infrav1.TerraformList{}, ns, func(typ watch.EventType, o client.Object) {
		if typ == watch.Added || typ == watch.Modified {
			t.terraform(o.(*infrav1.Terraform))
		}
	})
	t.watchSecrets(ctx, c, ns)
}

// watchSecrets watches Secrets in ns for the outputs Secrets.
func (t *tracker) watchSecrets(ctx context.Context, c client.WithWatch, ns string) {
	go watchAll(ctx, c, &corev1.SecretList{}, ns, func(typ watch.EventType, o client.Object) {
		if typ == watch.Added || typ == watch.Modified {
			t.secret(o.(*corev1.Secret))
		}
	})
}

// watchAll watches list's kind in ns ("" for all) until ctx ends,
// re-watching from the last resource version when a watch closes.
func watchAll(ctx context.Context, c client.WithWatch, list client.ObjectList, ns string, handle func(watch.EventType, client.Object)) {
	rv := ""
	for ctx.Err() == nil {
		w, err := c.Watch(ctx, list, &client.ListOptions{Namespace: ns, Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
		if err != nil {
			rv = "" // expired: start again from a fresh list
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				rv = ""
				break
			}
			o, ok := ev.Object.(client.Object)
			if !ok {
				continue
			}
			rv = o.GetResourceVersion()
			if ev.Type != watch.Bookmark {
				handle(ev.Type, o)
			}
		}
		w.Stop()
	}
}

func (t *tracker) notify() {
	close(t.changed)
	t.changed = make(chan struct{})
}

func (t *tracker) terraform(obj *infrav1.Terraform) {
	now := time.Now()
	key := obj.Namespace + "/" + obj.Name
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := obj.Status.Run; r != nil && !t.runIDs[key+"/"+r.ID] {
		t.runIDs[key+"/"+r.ID] = true
		started := now
		if r.Started != nil {
			started = r.Started.Time
		}
		t.runs = append(t.runs, runSeen{key: key, id: r.ID, action: r.Action, drift: r.Drift, at: now, started: started})
	}
	if conditions.IsTrue(obj, meta.ReadyCondition) && obj.Status.ObservedGeneration == obj.Generation &&
		obj.Status.Run == nil && obj.Status.LastAppliedRevision != "" {
		t.settle(key, obj.Status.LastAppliedRevision, now)
	}
	t.notify()
}

// settle records that key was settled at revision at now, unless it was
// before. The caller holds t.mu.
func (t *tracker) settle(key, revision string, now time.Time) {
	if t.settled[key] == nil {
		t.settled[key] = map[string]time.Time{}
	}
	if _, seen := t.settled[key][revision]; !seen {
		t.settled[key][revision] = now
	}
}

// startPeer watches a peer controller's objects of kind gvk, read as
// unstructured, and Secrets in namespace ns until ctx ends. A peer's
// object is settled as Landform's is, by the same Flux conventions: Ready
// at its generation with status.lastAppliedRevision.
func (t *tracker) startPeer(ctx context.Context, c client.WithWatch, ns string, gvk schema.GroupVersionKind) {
	go watchAll(ctx, c, listOf(gvk), ns, func(typ watch.EventType, o client.Object) {
		if u, ok := o.(*unstructured.Unstructured); ok && (typ == watch.Added || typ == watch.Modified) {
			t.peerObject(u)
		}
	})
	t.watchSecrets(ctx, c, ns)
}

func (t *tracker) peerObject(u *unstructured.Unstructured) {
	now := time.Now()
	generation, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	revision, _, _ := unstructured.NestedString(u.Object, "status", "lastAppliedRevision")
	ready := conditions.IsTrue(conditions.UnstructuredGetter(u), meta.ReadyCondition)
	t.mu.Lock()
	defer t.mu.Unlock()
	if ready && generation == u.GetGeneration() && revision != "" {
		t.settle(u.GetNamespace()+"/"+u.GetName(), revision, now)
	}
	t.notify()
}

func (t *tracker) secret(s *corev1.Secret) {
	if _, ok := s.Data["id"]; !ok {
		return
	}
	if _, ok := s.Data["input"]; !ok {
		return
	}
	key := s.Namespace + "/" + s.Name
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, seen := t.outputs[key]; !seen {
		t.outputs[key] = time.Now()
		t.notify()
	}
}

// done is when the object key is settled at revision with its outputs
// Secret written; false while it is not.
func (t *tracker) done(key, revision string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.doneLocked(key, revision)
}

func (t *tracker) doneLocked(key, revision string) (time.Time, bool) {
	ready, ok := t.settled[key][revision]
	if !ok {
		return time.Time{}, false
	}
	out, ok := t.outputs[key+"-outputs"]
	if !ok {
		return time.Time{}, false
	}
	if out.After(ready) {
		return out, true
	}
	return ready, true
}

// wait waits until every key is done at revision, and returns when each
// was.
func (t *tracker) wait(ctx context.Context, keys []string, revision string) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	pending := keys
	for {
		t.mu.Lock()
		// Only the keys not yet done are looked at again: at 1000 objects
		// every one of the many status updates wakes this loop.
		var still []string
		for _, k := range pending {
			if at, ok := t.doneLocked(k, revision); ok {
				out[k] = at
			} else {
				still = append(still, k)
			}
		}
		pending = still
		ch := t.changed
		t.mu.Unlock()
		if len(pending) == 0 {
			return out, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return out, ctx.Err()
		}
	}
}

// runsSince returns the runs seen starting at or after since.
func (t *tracker) runsSince(since time.Time) []runSeen {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []runSeen
	for _, r := range t.runs {
		if !r.at.Before(since) {
			out = append(out, r)
		}
	}
	return out
}

// count is how many of keys are done at revision.
func (t *tracker) count(keys []string, revision string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, k := range keys {
		if _, ok := t.doneLocked(k, revision); ok {
			n++
		}
	}
	return n
}
