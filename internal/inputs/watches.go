package inputs

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	ctrlsource "sigs.k8s.io/controller-runtime/pkg/source"
)

// Watches watches the kinds that inputs read fields of, each from the
// first time an object names it: registering watches for every kind up
// front would need read access to all of them, and a watch on a kind the
// controller may not list never syncs. Before a kind is watched, a list of
// one object's metadata proves the access; a refusal is returned (the
// object says InputForbidden and retries) and asked again next time, so
// access granted later takes effect without a restart. The cache holds
// metadata only; a change of the object's resourceVersion wakes its
// readers, which read the fields from the API server.
type Watches struct {
	mu      sync.Mutex
	watched map[schema.GroupVersionKind]bool
	ctrl    controller.Controller
	cache   cache.Cache
	reader  client.Reader
	mapFor  func(gvk schema.GroupVersionKind) handler.MapFunc
}

// NewWatches adds watches to c, on cache, after proving access with
// reader; mapFor maps an object of a kind to the Terraform objects that
// read it.
func NewWatches(c controller.Controller, cache cache.Cache, reader client.Reader, mapFor func(gvk schema.GroupVersionKind) handler.MapFunc) *Watches {
	return &Watches{watched: map[schema.GroupVersionKind]bool{}, ctrl: c, cache: cache, reader: reader, mapFor: mapFor}
}

// ensure watches gvk unless it is watched already.
func (w *Watches) ensure(ctx context.Context, gvk schema.GroupVersionKind) error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watched[gvk] {
		return nil
	}
	probe := &metav1.PartialObjectMetadataList{}
	probe.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := w.reader.List(ctx, probe, client.Limit(1)); err != nil {
		return err
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	if err := w.ctrl.Watch(ctrlsource.Kind(w.cache, client.Object(m), handler.EnqueueRequestsFromMapFunc(w.mapFor(gvk)),
		predicate.ResourceVersionChangedPredicate{})); err != nil {
		return err
	}
	w.watched[gvk] = true
	return nil
}
