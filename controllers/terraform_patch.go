package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// objectPatcher writes what a reconcile changed in a Terraform object in at
// most two requests: a merge patch of its metadata (the finalizer) when
// that changed, and one merge patch of its status, conditions included.
// Flux's patch helper writes the conditions in a request of their own, with
// a read and a retry on conflict, so that several controllers can share
// one object's conditions; nothing but this controller writes a Terraform
// object's status, so one request does, and a run costs fewer API writes:
// `make bench` counts 79 terraforms/status writes for 20 objects from
// create to Ready, 4 per object (docs/benchmarks.md, "API writes per
// object"), one per reconcile that changed status, where Flux's helper
// adds a conditions request to each.
// Like Flux's serial patcher, it remembers what it wrote, so that the next
// Patch sends only what changed since. The status patch is optimistic: a
// reconcile of a copy older than what was written last (the cache lags
// behind) must not write its stale view of a run back. On a conflict it
// reads the object from the API server: when that still records the run
// the reconcile's copy did (what changed meanwhile is a spec edit, a
// progress note, an annotation), the changes are written over it, since a
// run's outcome that was collected must not be lost to a conflict.
// Otherwise the conflict is returned and the reconcile retried.
type objectPatcher struct {
	client client.Client
	reader client.Reader
	before *infrav1.Terraform
}

func newObjectPatcher(obj *infrav1.Terraform, c client.Client, reader client.Reader) *objectPatcher {
	return &objectPatcher{client: c, reader: reader, before: obj.DeepCopy()}
}

// Patch writes obj's changes since the last Patch (or the patcher's
// creation). obj keeps its own content: only its resourceVersion is
// taken from the answers.
func (p *objectPatcher) Patch(ctx context.Context, obj *infrav1.Terraform) error {
	if !equality.Semantic.DeepEqual(p.before.ObjectMeta, obj.ObjectMeta) {
		written := obj.DeepCopy()
		if err := p.client.Patch(ctx, written, client.MergeFrom(p.before), client.FieldOwner(FieldOwner)); err != nil {
			return err
		}
		obj.ResourceVersion = written.ResourceVersion
		p.before.ObjectMeta = *obj.ObjectMeta.DeepCopy()
	}
	if !equality.Semantic.DeepEqual(p.before.Status, obj.Status) {
		// The base holds obj's metadata: the patch carries only status.
		base := p.before.DeepCopy()
		base.ObjectMeta = *obj.ObjectMeta.DeepCopy()
		written, err := p.patchStatus(ctx, base, obj)
		if apierrors.IsConflict(err) {
			written, err = p.rebaseStatus(ctx, base, obj, err)
		}
		if err != nil {
			return err
		}
		obj.ResourceVersion = written.ResourceVersion
		p.before.Status = *obj.Status.DeepCopy()
	}
	p.before.ObjectMeta.ResourceVersion = obj.ResourceVersion
	return nil
}

// patchStatus writes obj's status changes since base, failing on a
// conflict when the object is no longer at base's resourceVersion (the
// optimistic lock takes it from base).
func (p *objectPatcher) patchStatus(ctx context.Context, base, obj *infrav1.Terraform) (*infrav1.Terraform, error) {
	written := obj.DeepCopy()
	err := p.client.Status().Patch(ctx, written, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}),
		&client.SubResourcePatchOptions{PatchOptions: client.PatchOptions{FieldManager: FieldOwner}})
	return written, err
}

// rebaseStatus writes the status changes again over the object as the API
// server has it, when that records the same run as the copy the reconcile
// started from; else it returns conflict.
func (p *objectPatcher) rebaseStatus(ctx context.Context, base, obj *infrav1.Terraform, conflict error) (*infrav1.Terraform, error) {
	latest := &infrav1.Terraform{}
	if err := p.reader.Get(ctx, client.ObjectKeyFromObject(obj), latest); err != nil {
		return nil, conflict
	}
	if runID(latest.Status.Run) != runID(p.before.Status.Run) {
		return nil, conflict
	}
	base.ResourceVersion = latest.ResourceVersion
	return p.patchStatus(ctx, base, obj)
}

func runID(r *infrav1.RunStatus) string {
	if r == nil {
		return ""
	}
	return r.ID
}
