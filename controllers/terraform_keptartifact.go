package controllers

import (
	"context"
	"errors"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/keptartifact"
	"github.com/landform-dev/landform/internal/source"
)

// The artifact of the last successful apply is kept in Secrets owned by
// the object (status.lastAppliedArtifact says which), so that deletion can
// destroy after the source is gone: Flux often prunes a GitRepository
// together with the Terraform objects that use it.

func (r *TerraformReconciler) keptArtifacts() keptartifact.Store {
	return keptartifact.Store{Client: r.Client, MaxSize: r.KeptArtifactMaxSize}
}

// keepApplied keeps the artifact an apply run applied. Keeping is never a
// reason to fail the apply: what goes wrong is a Warning event, and the
// next reconcile that fetches the same artifact tries again.
func (r *TerraformReconciler) keepApplied(ctx context.Context, obj *infrav1.Terraform, run *infrav1.RunStatus) {
	if run.ArtifactDigest == "" {
		// Started by a controller that did not record it.
		return
	}
	r.keepArtifact(ctx, obj, run.Revision, run.ArtifactDigest, nil)
}

// keepAgain keeps the applied artifact a had not been kept for (not at
// hand when the apply was collected, or a failed write), now that the
// source publishes it.
func (r *TerraformReconciler) keepAgain(ctx context.Context, obj *infrav1.Terraform, a *source.Artifact) {
	k := obj.Status.LastAppliedArtifact
	if k == nil || k.Kept || k.Digest != a.Digest || !obj.DeletionTimestamp.IsZero() {
		return
	}
	if limit := r.keptArtifacts().Limit(); limit < 0 || k.Size > limit {
		return
	}
	r.keepArtifact(ctx, obj, k.Revision, k.Digest, a)
}

// keepArtifact keeps the artifact with digest d, from the cache or else
// from published (when it is that artifact), unless it is kept already.
func (r *TerraformReconciler) keepArtifact(ctx context.Context, obj *infrav1.Terraform, revision, d string, published *source.Artifact) {
	store := r.keptArtifacts()
	if k := obj.Status.LastAppliedArtifact; k != nil && k.Kept && k.Digest == d {
		if has, err := store.Has(ctx, obj, d); err == nil && has {
			k.Revision = revision
			return
		}
	}
	k := &infrav1.AppliedArtifactStatus{Revision: revision, Digest: d}
	obj.Status.LastAppliedArtifact = k
	notKept := func(format string, args ...any) {
		// What was kept before is another revision's: destroying with it
		// could leave resources behind or fail, so it goes.
		if err := store.Delete(ctx, obj); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "deleting the artifact kept before")
		}
		if format != "" {
			r.event(obj, revision, corev1.EventTypeWarning, infrav1.ArtifactNotKeptReason, format, args...)
		}
	}
	limit := store.Limit()
	if limit < 0 {
		notKept("")
		return
	}
	tarball, _, ok, err := r.Fetcher.Cached(ctx, d)
	if err == nil && !ok && published != nil && published.Digest == d {
		tarball, _, err = r.Fetcher.Fetch(ctx, *published)
		ok = err == nil
	}
	if !ok {
		why := "it is no longer in the controller's cache"
		if err != nil {
			why = err.Error()
		}
		notKept("the artifact of revision %s was applied but is not kept for a destroy without its source (%s); it is kept once the source publishes it again", revision, why)
		return
	}
	fi, err := os.Stat(tarball)
	if err != nil {
		notKept("the artifact of revision %s was applied but is not kept for a destroy without its source: %v", revision, err)
		return
	}
	k.Size = fi.Size()
	if k.Size > limit {
		notKept("the artifact of revision %s (%s) is larger than --kept-artifact-max-size (%s) and is not kept: deleting this object will need its source, so keep the source until then, or raise the limit",
			revision, bytesString(k.Size), bytesString(limit))
		return
	}
	data, err := os.ReadFile(tarball)
	if err == nil {
		err = store.Save(ctx, obj, revision, d, data)
	}
	if err != nil {
		notKept("keeping the artifact of revision %s for a destroy without its source failed (%v); trying again at the next reconcile", revision, err)
		return
	}
	k.Kept = true
}

// keptDigest is the digest of the artifact kept for obj; empty when none is.
func keptDigest(obj *infrav1.Terraform) string {
	if k := obj.Status.LastAppliedArtifact; k != nil && k.Kept {
		return k.Digest
	}
	return ""
}

// keptForDestroy returns the artifact obj last applied, as kept, for the
// destroy of an object whose source (or its artifact) is gone (srcErr
// says how). The local cache serves it when it has the digest; otherwise
// it comes from the Secrets, verified. Without one, the deletion is
// Stalled until the source is back or the user lets the resources go:
// retrying cannot bring the artifact back.
func (r *TerraformReconciler) keptForDestroy(ctx context.Context, obj *infrav1.Terraform, srcErr error) (*source.Artifact, string, string, error) {
	ref := obj.Spec.SourceRef
	src := fmt.Sprintf("%s %s/%s", ref.Kind, obj.GetSourceNamespace(), ref.Name)
	reason, gone := infrav1.ArtifactFailedReason, fmt.Sprintf("the artifact of source %s cannot be downloaded (%v)", src, srcErr)
	switch {
	case errors.Is(srcErr, source.ErrSourceNotFound):
		reason, gone = infrav1.SourceNotFoundReason, fmt.Sprintf("source %s is gone", src)
	case errors.Is(srcErr, source.ErrSourceNotReady):
		reason, gone = infrav1.SourceNotReadyReason, fmt.Sprintf("source %s has no artifact", src)
	case errors.Is(srcErr, source.ErrKindNotServed):
		reason, gone = infrav1.SourceKindNotServedReason, fmt.Sprintf("source %s cannot be read (%v)", src, srcErr)
	}
	k := obj.Status.LastAppliedArtifact
	stalled := func(why string) error {
		revision := obj.Status.LastAppliedRevision
		if k != nil {
			revision = k.Revision
		}
		return stalling(reason, "%s and %s: restore the source (revision %s) to destroy from it", gone, why, revision)
	}
	switch limit := r.keptArtifacts().Limit(); {
	case k == nil:
		return nil, "", "", stalled("no applied artifact was kept (nothing was applied by a controller that keeps artifacts)")
	case k.Kept:
	case limit < 0:
		return nil, "", "", stalled("the controller keeps no artifacts (--kept-artifact-max-size is negative)")
	case k.Size > limit:
		return nil, "", "", stalled(fmt.Sprintf("the last applied artifact (%s) was too large to keep (--kept-artifact-max-size is %s)", bytesString(k.Size), bytesString(limit)))
	default:
		return nil, "", "", stalled("the last applied artifact could not be kept (see the ArtifactNotKept events)")
	}
	tarball, dir, ok, err := r.Fetcher.Cached(ctx, k.Digest)
	if err != nil {
		return nil, "", "", retry(infrav1.DestroyFailedReason, "reading the cached artifact of revision %s: %v", k.Revision, err)
	}
	if !ok {
		data, err := r.keptArtifacts().Load(ctx, obj, k.Digest)
		switch {
		case errors.Is(err, keptartifact.ErrNotFound) || errors.Is(err, keptartifact.ErrDigestMismatch):
			return nil, "", "", stalled(fmt.Sprintf("the artifact kept for it cannot be used (%v)", err))
		case err != nil:
			return nil, "", "", retry(infrav1.DestroyFailedReason, "reading the kept artifact of revision %s: %v", k.Revision, err)
		}
		if tarball, dir, err = r.Fetcher.Restore(ctx, k.Digest, data); err != nil {
			return nil, "", "", retry(infrav1.DestroyFailedReason, "restoring the kept artifact of revision %s: %v", k.Revision, err)
		}
	}
	msg := fmt.Sprintf("%s; destroying with the last applied artifact %s", gone, k.Revision)
	ctrl.LoggerFrom(ctx).Info(msg, "digest", k.Digest)
	r.event(obj, k.Revision, corev1.EventTypeNormal, infrav1.DeletingReason, "%s", msg)
	a := &source.Artifact{Kind: ref.Kind, Namespace: obj.GetSourceNamespace(), Name: ref.Name, Revision: k.Revision, Digest: k.Digest}
	return a, tarball, dir, nil
}

// bytesString is n bytes for people.
func bytesString(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
