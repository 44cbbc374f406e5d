package controllers

import (
	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// revisionAnnotation carries the source revision on events, as Flux does.
const revisionAnnotation = "infra.landform.dev/revision"

// event records a Kubernetes event annotated with the revision. Messages
// never carry values: only ids, counts and names.
func (r *TerraformReconciler) event(obj *infrav1.Terraform, revision, eventType, reason, format string, args ...any) {
	if r.EventRecorder == nil {
		return
	}
	r.EventRecorder.AnnotatedEventf(obj, map[string]string{revisionAnnotation: revision}, eventType, reason, format, args...)
}
