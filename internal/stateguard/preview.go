package stateguard

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/custody"
	"github.com/landform-dev/landform/internal/outcome"
)

// Snapshot takes a preview's snapshot of its target's state
// (custody.Keeper.Snapshot) and records it in status.preview. It returns
// the snapshot's digest, which the preview's inputs include: a new state
// of the target (it applied) is a new plan. A target that does not exist
// yet is waited for; one in a namespace that does not grant it, or with a
// custom backend, stalls (looked at again after the retry interval: a
// grant is a namespace label, no change of this object).
func (g *Guard) Snapshot(ctx context.Context, obj *infrav1.Terraform, now time.Time) (string, error) {
	st, err := g.Keeper.Snapshot(ctx, obj, obj.Status.Preview, now)
	var refused *custody.SnapshotRefusedError
	switch {
	case errors.As(err, &refused) && refused.Reason == infrav1.PreviewTargetNotFoundReason:
		return "", outcome.WaitingFor(refused.Reason, obj.GetRetryInterval(), "%s", refused.Message)
	case errors.As(err, &refused):
		return "", outcome.StalledUntil(refused.Reason, obj.GetRetryInterval(), "%s", refused.Message)
	case err != nil:
		return "", outcome.Retry(infrav1.PlanFailedReason, "taking the snapshot of the target's state: %v", err)
	}
	if old := obj.Status.Preview; old != nil && old.StateDigest != st.StateDigest && obj.Status.Plan != nil {
		g.Events.Event(obj, obj.Status.LastAttemptedRevision, corev1.EventTypeNormal, infrav1.PreviewStateStaleReason,
			"the state of %s changed (serial %d, after plan %s): planning this preview again against it",
			st.Target, st.StateSerial, OrUnknown(st.TargetAppliedPlan))
	}
	obj.Status.Preview = st
	return st.StateDigest, nil
}

// AdmitInNamespace refuses, before it runs anything, an object that is
// no preview in a namespace labelled infra.landform.dev/preview-only:
// such a namespace is where pull requests' objects are made (by a
// template any pull request may change), and nothing there may apply.
func (g *Guard) AdmitInNamespace(ctx context.Context, obj *infrav1.Terraform) error {
	if obj.IsPreview() {
		return nil
	}
	only, err := g.Keeper.PreviewOnly(ctx, obj.Namespace)
	if err != nil {
		return outcome.Retry(infrav1.RunnerFailedReason, "%v", err)
	}
	if only {
		return outcome.StalledUntil(infrav1.PreviewOnlyNamespaceReason, obj.GetRetryInterval(),
			"namespace %s admits only previews (label %s=true): this object has no spec.preview, so it never runs here; make it a preview, or move it to another namespace",
			obj.Namespace, infrav1.PreviewOnlyLabel)
	}
	return nil
}
