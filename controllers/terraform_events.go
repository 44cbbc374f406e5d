package controllers

import (
	"errors"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/metrics"
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

// recordMetrics updates the per-object gauges and the reconcile histogram.
func recordMetrics(obj *infrav1.Terraform, err error, d time.Duration) {
	metrics.ObserveReconcile(outcome(err), d)
	if !obj.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(obj, infrav1.Finalizer) {
		metrics.ForgetObject(obj.Namespace, obj.Name)
		return
	}
	metrics.SetObjectState(obj.Namespace, obj.Name, obj.PendingPlan() != "", conditions.IsTrue(obj, infrav1.DriftedCondition))
}

// outcome names how a reconcile ended, for metrics.
func outcome(err error) string {
	var s *stallingError
	var w *waitingError
	var p *inProgressError
	switch {
	case err == nil:
		return "success"
	case errors.As(err, &p):
		return "progressing"
	case errors.As(err, &s):
		return "stalled"
	case errors.As(err, &w):
		return "waiting"
	default:
		return "retry"
	}
}
