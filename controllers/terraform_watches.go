package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/inputs"
)

// The indexes SetupWithManager registers, and how an event of a watched
// object becomes the requests of the Terraform objects it concerns.
const (
	sourceIndexKey    = ".metadata.sourceRef"
	dependsOnIndexKey = ".metadata.dependsOnTerraform"
	varsFromIndexKey  = ".metadata.varsFrom"
)

func indexSource(o client.Object) []string {
	tf := o.(*infrav1.Terraform)
	return []string{fmt.Sprintf("%s/%s/%s", tf.Spec.SourceRef.Kind, tf.GetSourceNamespace(), tf.Spec.SourceRef.Name)}
}

// indexDependsOn indexes the Terraform objects an object depends on, and
// a preview's target: a change of the target's status (a new applied
// plan) wakes its previews, which take a new snapshot.
func indexDependsOn(o client.Object) []string {
	tf := o.(*infrav1.Terraform)
	var keys []string
	if key := tf.PreviewTargetKey(); key != "" {
		keys = append(keys, key)
	}
	for _, d := range tf.Spec.DependsOn {
		gvk, key := inputs.DependencyKey(tf, d)
		if gvk.Group == infrav1.GroupVersion.Group && gvk.Kind == infrav1.TerraformKind {
			keys = append(keys, key.String())
		}
	}
	return keys
}

// indexed maps a watched object to the Terraform objects to reconcile,
// by the indexes SetupWithManager registers.
type indexed struct{ client.Reader }

// source maps a source to the Terraform objects that use it.
func (x indexed) source(kind string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		return x.requests(ctx, client.MatchingFields{sourceIndexKey: fmt.Sprintf("%s/%s/%s", kind, o.GetNamespace(), o.GetName())})
	}
}

// input maps an object of gvk to the Terraform objects (of any
// namespace) whose inputs read its fields.
func (x indexed) input(gvk schema.GroupVersionKind) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		return x.requests(ctx, client.MatchingFields{varsFromIndexKey: inputs.ObjectKey(gvk, o.GetNamespace(), o.GetName())})
	}
}

// data maps a Secret or ConfigMap (kind) to the Terraform objects of its
// namespace whose varsFrom or imports name it.
func (x indexed) data(kind string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		return x.requests(ctx, client.InNamespace(o.GetNamespace()), client.MatchingFields{varsFromIndexKey: inputs.DataKey(kind, o.GetName())})
	}
}

// dependents maps a Terraform object to those that depend on it. With
// --watch-label-selector both are in this shard's cache: a dependent in
// another shard sees its dependency Ready at its next retryInterval.
func (x indexed) dependents(ctx context.Context, o client.Object) []reconcile.Request {
	return x.requests(ctx, client.MatchingFields{dependsOnIndexKey: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}.String()})
}

func (x indexed) requests(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	list := &infrav1.TerraformList{}
	if err := x.List(ctx, list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing Terraform objects for a watch event")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, tf := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&tf)})
	}
	return reqs
}
