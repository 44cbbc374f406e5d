package controllers

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrlsource "sigs.k8s.io/controller-runtime/pkg/source"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/source"
)

// DefaultSourceDiscoveryInterval is how often the API server is asked which
// Flux source kinds it serves.
const DefaultSourceDiscoveryInterval = time.Minute

// sourceKindWatcher watches only the Flux source kinds the API server
// serves, at the version it serves them: a watch on a kind it does not
// serve never syncs and would stop the controller (Flux before v2.6 serves
// OCIRepository only at v1beta2; a cluster may have GitRepository alone).
// It asks discovery again every interval (discovery needs no RBAC), watches
// the kinds that appeared, and wakes the objects that use them: they were
// Stalled with SourceKindNotServed.
type sourceKindWatcher struct {
	served    *source.Served
	discovery discovery.DiscoveryInterface
	cache     cache.Cache
	reader    client.Reader
	interval  time.Duration
	log       logr.Logger
	// mapFor maps a source of kind to the Terraform objects using it.
	mapFor func(kind string) handler.MapFunc

	ctrl    controller.Controller
	watched map[schema.GroupVersionKind]bool
	// wake takes the Terraform objects of a kind that became served.
	wake chan event.GenericEvent
}

// discover asks the API server which kinds it serves and watches those
// newly served. Before the manager starts, only the watches are added;
// after, the objects using a new kind are woken.
func (w *sourceKindWatcher) discover(ctx context.Context, started bool) error {
	added, err := w.served.Discover(w.discovery)
	if err != nil {
		return err
	}
	for _, gvk := range added {
		w.log.Info("Flux source kind served", "kind", gvk.Kind, "apiVersion", gvk.GroupVersion().String())
		if !w.watched[gvk] {
			if err := w.ctrl.Watch(ctrlsource.Kind(w.cache, sourceObject(gvk), handler.EnqueueRequestsFromMapFunc(w.mapFor(gvk.Kind)), source.ArtifactChanged)); err != nil {
				return fmt.Errorf("watching %s: %w", gvk, err)
			}
			w.watched[gvk] = true
		}
		if started {
			w.wakeUsers(ctx, gvk.Kind)
		}
	}
	if started {
		return nil
	}
	for _, kind := range source.Kinds {
		if _, err := w.served.Lookup(kind); err != nil {
			w.log.Info("Flux source kind not served: objects using it are Stalled until it is", "kind", kind)
		}
	}
	return nil
}

// sourceObject is what a watch on gvk holds: the whole v1 object (which
// the reconciler then reads from the cache), or only the metadata of an
// older version (read from the API server when needed).
func sourceObject(gvk schema.GroupVersionKind) client.Object {
	if obj := source.V1Object(gvk); obj != nil {
		return obj
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	return m
}

// wakeUsers queues the Terraform objects whose sourceRef is of kind.
func (w *sourceKindWatcher) wakeUsers(ctx context.Context, kind string) {
	list := &infrav1.TerraformList{}
	if err := w.reader.List(ctx, list); err != nil {
		w.log.Error(err, "listing Terraform objects to wake after a source kind appeared", "kind", kind)
		return
	}
	for i := range list.Items {
		if list.Items[i].Spec.SourceRef.Kind != kind {
			continue
		}
		select {
		case w.wake <- event.GenericEvent{Object: &list.Items[i]}:
		case <-ctx.Done():
			return
		}
	}
}

// Start asks discovery again every interval until ctx ends.
func (w *sourceKindWatcher) Start(ctx context.Context) error {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := w.discover(ctx, true); err != nil {
				w.log.Error(err, "discovering the Flux source kinds served")
			}
		}
	}
}
