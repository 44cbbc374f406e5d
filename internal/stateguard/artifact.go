package stateguard

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/custody"
	"github.com/landform-dev/landform/internal/outcome"
	"github.com/landform-dev/landform/internal/source"
)

// KeepApplied keeps the artifact an apply run applied, for a destroy
// without its source (custody.Keeper.KeepArtifact); what goes wrong is a
// Warning event, never a failed apply.
func (g *Guard) KeepApplied(ctx context.Context, obj *infrav1.Terraform, run *infrav1.RunStatus) {
	if run.ArtifactDigest == "" {
		// Started by a controller that did not record it.
		return
	}
	g.artifactNotKept(obj, run.Revision, g.Keeper.KeepArtifact(ctx, obj, run.Revision, run.ArtifactDigest, nil))
}

// KeepAgain keeps the applied artifact a, not kept when its apply was
// collected, now that its source publishes it again.
func (g *Guard) KeepAgain(ctx context.Context, obj *infrav1.Terraform, a *source.Artifact) {
	g.artifactNotKept(obj, a.Revision, g.Keeper.KeepAgain(ctx, obj, a))
}

// artifactNotKept says why the artifact of revision was not kept.
func (g *Guard) artifactNotKept(obj *infrav1.Terraform, revision, why string) {
	if why != "" {
		g.Events.Event(obj, revision, corev1.EventTypeWarning, infrav1.ArtifactNotKeptReason, "%s", why)
	}
}

// KeptForDestroy returns the artifact obj last applied, as kept, for the
// destroy of an object whose source (or its artifact) is gone (srcErr
// says how). Without one, the deletion is Stalled until the source is
// back or the user lets the resources go: retrying cannot bring the
// artifact back.
func (g *Guard) KeptForDestroy(ctx context.Context, obj *infrav1.Terraform, srcErr error) (*source.Artifact, string, string, error) {
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
	tarball, dir, err := g.Keeper.KeptArtifact(ctx, obj)
	var unusable *custody.ArtifactUnusableError
	switch {
	case errors.As(err, &unusable):
		revision := obj.Status.LastAppliedRevision
		if k := obj.Status.LastAppliedArtifact; k != nil {
			revision = k.Revision
		}
		return nil, "", "", outcome.Stalling(reason, "%s and %s: restore the source (revision %s) to destroy from it", gone, unusable.Why, revision)
	case err != nil:
		return nil, "", "", outcome.Retry(infrav1.DestroyFailedReason, "%v", err)
	}
	k := obj.Status.LastAppliedArtifact
	msg := fmt.Sprintf("%s; destroying with the last applied artifact %s", gone, k.Revision)
	ctrl.LoggerFrom(ctx).Info(msg, "digest", k.Digest)
	g.Events.Event(obj, k.Revision, corev1.EventTypeNormal, infrav1.DeletingReason, "%s", msg)
	a := &source.Artifact{Kind: ref.Kind, Namespace: obj.GetSourceNamespace(), Name: ref.Name, Revision: k.Revision, Digest: k.Digest}
	return a, tarball, dir, nil
}
