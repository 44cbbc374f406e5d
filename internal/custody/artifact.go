package custody

import (
	"context"
	"errors"
	"fmt"
	"os"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/keptartifact"
	"github.com/landform-dev/landform/internal/source"
)

// The artifact of the last successful apply is kept in Secrets labelled
// with the object's UID (status.lastAppliedArtifact says which), so that
// deletion can destroy after the source is gone: Flux often prunes a
// GitRepository together with the Terraform objects that use it. It is
// kept where the state is, because a destroy needs both.

func (k *Keeper) keptArtifacts() keptartifact.Store {
	return keptartifact.Store{Client: k.Client, MaxSize: k.ArtifactMaxSize}
}

// KeepArtifact keeps the artifact with digest d that an apply of revision
// applied, from the artifact cache or else from published (when it is
// that artifact), and records it in status.lastAppliedArtifact, unless it
// is kept already. Keeping is never a reason to fail the apply: it
// returns why it did not keep it, for a Warning event ("" when it did,
// or when keeping is switched off), and the next reconcile that fetches
// the same artifact tries again (KeepAgain).
func (k *Keeper) KeepArtifact(ctx context.Context, obj *v1alpha1.Terraform, revision, d string, published *source.Artifact) (notKept string) {
	store := k.keptArtifacts()
	if st := obj.Status.LastAppliedArtifact; st != nil && st.Kept && st.Digest == d {
		if has, err := store.Has(ctx, obj, d); err == nil && has {
			st.Revision = revision
			return ""
		}
	}
	st := &v1alpha1.AppliedArtifactStatus{Revision: revision, Digest: d}
	obj.Status.LastAppliedArtifact = st
	// What was kept before is another revision's: destroying with it
	// could leave resources behind or fail, so it goes.
	drop := func(format string, args ...any) string {
		msg := fmt.Sprintf(format, args...)
		if err := store.Delete(ctx, obj); err != nil {
			msg += fmt.Sprintf("; deleting the artifact kept before failed: %v", err)
		}
		return msg
	}
	limit := store.Limit()
	if limit < 0 {
		if err := store.Delete(ctx, obj); err != nil {
			return fmt.Sprintf("deleting the artifact kept before failed: %v", err)
		}
		return ""
	}
	tarball, _, ok, err := k.Artifacts.Cached(ctx, d)
	if err == nil && !ok && published != nil && published.Digest == d {
		tarball, _, err = k.Artifacts.Fetch(ctx, *published)
		ok = err == nil
	}
	if !ok {
		why := "it is no longer in the controller's cache"
		if err != nil {
			why = err.Error()
		}
		return drop("the artifact of revision %s was applied but is not kept for a destroy without its source (%s); it is kept once the source publishes it again", revision, why)
	}
	fi, err := os.Stat(tarball)
	if err != nil {
		return drop("the artifact of revision %s was applied but is not kept for a destroy without its source: %v", revision, err)
	}
	st.Size = fi.Size()
	if st.Size > limit {
		return drop("the artifact of revision %s (%s) is larger than --kept-artifact-max-size (%s) and is not kept: deleting this object will need its source, so keep the source until then, or raise the limit",
			revision, bytesString(st.Size), bytesString(limit))
	}
	data, err := os.ReadFile(tarball)
	if err == nil {
		err = store.Save(ctx, obj, revision, d, data)
	}
	if err != nil {
		return drop("keeping the artifact of revision %s for a destroy without its source failed (%v); trying again at the next reconcile", revision, err)
	}
	st.Kept = true
	return ""
}

// KeepAgain keeps the applied artifact a, which was not kept (not at hand
// when the apply was collected, or a failed write), now that the source
// publishes it; what KeepArtifact returns.
func (k *Keeper) KeepAgain(ctx context.Context, obj *v1alpha1.Terraform, a *source.Artifact) string {
	st := obj.Status.LastAppliedArtifact
	if st == nil || st.Kept || st.Digest != a.Digest || !obj.DeletionTimestamp.IsZero() {
		return ""
	}
	if limit := k.keptArtifacts().Limit(); limit < 0 || st.Size > limit {
		return ""
	}
	return k.KeepArtifact(ctx, obj, st.Revision, st.Digest, a)
}

// KeptDigest is the digest of the artifact kept for obj; empty when none
// is.
func KeptDigest(obj *v1alpha1.Terraform) string {
	if st := obj.Status.LastAppliedArtifact; st != nil && st.Kept {
		return st.Digest
	}
	return ""
}

// ArtifactUnusableError: no usable artifact is kept for obj's destroy, and
// retrying cannot bring one back. Why says what is missing.
type ArtifactUnusableError struct{ Why string }

func (e *ArtifactUnusableError) Error() string { return e.Why }

// KeptArtifact returns the tarball and extracted tree of the artifact obj
// last applied, for a destroy without its source: from the artifact cache
// when it has the digest, else from the Secrets, verified against the
// digest recorded. Without one: *ArtifactUnusableError; any other error
// may pass on a retry.
func (k *Keeper) KeptArtifact(ctx context.Context, obj *v1alpha1.Terraform) (tarball, dir string, err error) {
	st := obj.Status.LastAppliedArtifact
	unusable := func(format string, args ...any) (string, string, error) {
		return "", "", &ArtifactUnusableError{Why: fmt.Sprintf(format, args...)}
	}
	switch limit := k.keptArtifacts().Limit(); {
	case st == nil:
		return unusable("no applied artifact was kept (nothing was applied by a controller that keeps artifacts)")
	case st.Kept:
	case limit < 0:
		return unusable("the controller keeps no artifacts (--kept-artifact-max-size is negative)")
	case st.Size > limit:
		return unusable("the last applied artifact (%s) was too large to keep (--kept-artifact-max-size is %s)", bytesString(st.Size), bytesString(limit))
	default:
		return unusable("the last applied artifact could not be kept (see the ArtifactNotKept events)")
	}
	tarball, dir, ok, err := k.Artifacts.Cached(ctx, st.Digest)
	if err != nil {
		return "", "", fmt.Errorf("reading the cached artifact of revision %s: %w", st.Revision, err)
	}
	if ok {
		return tarball, dir, nil
	}
	data, err := k.keptArtifacts().Load(ctx, obj, st.Digest)
	switch {
	case errors.Is(err, keptartifact.ErrNotFound) || errors.Is(err, keptartifact.ErrDigestMismatch):
		return unusable("the artifact kept for it cannot be used (%v)", err)
	case err != nil:
		return "", "", fmt.Errorf("reading the kept artifact of revision %s: %w", st.Revision, err)
	}
	if tarball, dir, err = k.Artifacts.Restore(ctx, st.Digest, data); err != nil {
		return "", "", fmt.Errorf("restoring the kept artifact of revision %s: %w", st.Revision, err)
	}
	return tarball, dir, nil
}

// DeleteArtifact deletes the artifact kept for obj (with its state).
func (k *Keeper) DeleteArtifact(ctx context.Context, obj *v1alpha1.Terraform) error {
	return k.keptArtifacts().Delete(ctx, obj)
}

// bytesString is n bytes for people.
func bytesString(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
