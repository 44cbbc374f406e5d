package controllers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/planstore"
	"github.com/landform-dev/landform/internal/preview"
)

// previewAnnotation names, in a preview's events, the object it previews
// (its own name without one): a commit-status Provider's
// commitStatusExpr makes it the check's fixed name.
var previewAnnotation = metadataKey("preview")

// previewName is previewAnnotation's value.
func previewName(obj *infrav1.Terraform) string {
	if s := obj.Spec.Preview.StateFrom; s != nil {
		return s.Name
	}
	return obj.Name
}

// planPreview tells a preview's new plan as a pull request shows it: the
// PlanPreview event, whose message is a short Markdown summary
// (internal/preview), addresses and counts only. A pull request comment
// provider posts it, and edits the same comment on the next.
func (rep *reporter) planPreview(obj *infrav1.Terraform, p *planstore.Plan) {
	if rep == nil || rep.recorder == nil {
		return
	}
	changes, err := preview.Changes(p.JSONPlan)
	if err != nil {
		rep.Event(obj, p.Revision, corev1.EventTypeWarning, infrav1.PlanPreviewReason, "plan %s cannot be summarised: %v", p.ID, err)
		return
	}
	s := preview.Summary{Namespace: obj.Namespace, Name: obj.Name, PlanID: p.ID, Revision: p.Revision,
		Changes: changes, MaxAddresses: int(obj.Spec.Preview.Summary.MaxAddresses)}
	if st := obj.Status.Preview; st != nil {
		s.Target, s.StateSerial, s.TargetAppliedPlan = st.Target, st.StateSerial, st.TargetAppliedPlan
	}
	rep.PlanEvent(obj, p.ID, p.Revision, corev1.EventTypeNormal, infrav1.PlanPreviewReason, "%s", s.Markdown())
}

// previewEnding is what a preview's finished event says when the
// reconcile got through: the reason a commit status describes ("changes
// planned", "no changes") and the counts.
func previewEnding(obj *infrav1.Terraform) (reason, message string) {
	p := obj.Status.Plan
	if p == nil {
		return infrav1.NoChangesReason, "no plan"
	}
	if p.Pending == "" {
		return infrav1.NoChangesReason, fmt.Sprintf("plan %s: no changes", p.ID)
	}
	return infrav1.ChangesPlannedReason, fmt.Sprintf("plan %s: %s", p.ID, planCounts(p))
}

// redacted is message as a preview's event may say it: a failure's text
// is a channel the module controls, and a pull request comment is read by
// whoever reads the pull request (spec.preview.summary.errors).
func redacted(obj *infrav1.Terraform, eventType, reason, message string) string {
	if !obj.IsPreview() || eventType != corev1.EventTypeWarning || obj.Spec.Preview.Summary.Errors == infrav1.PreviewErrorsFull {
		return message
	}
	return preview.Redacted(reason, obj.Namespace, obj.Name)
}
