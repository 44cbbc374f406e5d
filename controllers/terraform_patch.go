package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// objectPatcher writes what a reconcile changed in a Terraform object in at
// most two requests: a merge patch of its metadata (the finalizer) when
// that changed, and one merge patch of its status, conditions included.
// Flux's patch helper writes the conditions in a request of their own, with
// a read and a retry on conflict, so that several controllers can share
// one object's conditions; nothing but this controller writes a Terraform
// object's status, so one request does, and a run costs fewer API writes.
// Like Flux's serial patcher, it remembers what it wrote, so that the next
// Patch sends only what changed since; like Flux's conditions patch, the
// status patch fails on a conflict when the object changed meanwhile.
type objectPatcher struct {
	client client.Client
	before *infrav1.Terraform
}

func newObjectPatcher(obj *infrav1.Terraform, c client.Client) *objectPatcher {
	return &objectPatcher{client: c, before: obj.DeepCopy()}
}

// Patch writes obj's changes since the last Patch (or the patcher's
// creation). obj keeps its own content: only its resourceVersion is
// taken from the answers.
func (p *objectPatcher) Patch(ctx context.Context, obj *infrav1.Terraform) error {
	if !equality.Semantic.DeepEqual(p.before.ObjectMeta, obj.ObjectMeta) {
		written := obj.DeepCopy()
		if err := p.client.Patch(ctx, written, client.MergeFrom(p.before), client.FieldOwner(fieldOwner)); err != nil {
			return err
		}
		obj.ResourceVersion = written.ResourceVersion
		p.before.ObjectMeta = *obj.ObjectMeta.DeepCopy()
	}
	if !equality.Semantic.DeepEqual(p.before.Status, obj.Status) {
		// The base holds obj's metadata: the patch carries only status.
		base := p.before.DeepCopy()
		base.ObjectMeta = *obj.ObjectMeta.DeepCopy()
		written := obj.DeepCopy()
		// Optimistic: a reconcile of a copy older than what was written
		// last (the cache lags behind) must not write its stale view of a
		// run back; it fails with a conflict and is retried.
		if err := p.client.Status().Patch(ctx, written, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}),
			&client.SubResourcePatchOptions{PatchOptions: client.PatchOptions{FieldManager: fieldOwner}}); err != nil {
			return err
		}
		obj.ResourceVersion = written.ResourceVersion
		p.before.Status = *obj.Status.DeepCopy()
	}
	p.before.ObjectMeta.ResourceVersion = obj.ResourceVersion
	return nil
}
