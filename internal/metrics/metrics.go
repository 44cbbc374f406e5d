// Package metrics holds Landform's Prometheus metrics and Flux's
// gotk_reconcile_* series (fluxcd/pkg/runtime/metrics, which Flux's
// dashboards read), registered with controller-runtime's registry so they are
// served on the manager's metrics endpoint. Labels carry names and outcomes
// only, never values. Queue depth comes from controller-runtime itself:
// workqueue_depth{name="terraform"}. docs/metrics.md is the reference.
package metrics

import (
	"time"

	fluxmeta "github.com/fluxcd/pkg/apis/meta"
	fluxmetrics "github.com/fluxcd/pkg/runtime/metrics"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	reconcileDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "landform_reconcile_duration_seconds",
		Help:    "Duration of Terraform reconciles by result (success, progressing, waiting, stalled, retry).",
		Buckets: []float64{0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800},
	}, []string{"result"})

	runs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "landform_runs_total",
		Help: "Terraform runs by action (plan, apply, destroy, outputs) and result (success, failure).",
	}, []string{"action", "result"})

	pendingPlans = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "landform_plan_pending",
		Help: "1 while a Terraform object has a plan waiting for approval.",
	}, []string{"namespace", "name"})

	drifted = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "landform_drifted",
		Help: "1 while a Terraform object's last drift check found drift.",
	}, []string{"namespace", "name"})

	runnerStart = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "landform_runner_start_seconds",
		Help:    "Time from asking for a runner to its health check answering, by placement (local, pod).",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120},
	}, []string{"placement"})

	locksRecovered = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "landform_state_locks_recovered_total",
		Help: "State locks released because the runner holding them was proved gone.",
	})

	// flux records gotk_reconcile_condition, gotk_reconcile_duration_seconds
	// and gotk_suspend_status as every Flux controller does. Registered once
	// per process: tests and `landform dev` start several managers.
	flux = fluxmetrics.NewRecorder()
)

// fluxConditions are the conditions Flux's dashboards and alerts read.
var fluxConditions = []string{fluxmeta.ReadyCondition, fluxmeta.ReconcilingCondition, fluxmeta.StalledCondition}

func init() {
	ctrlmetrics.Registry.MustRegister(reconcileDuration, runs, pendingPlans, drifted, runnerStart, locksRecovered)
	ctrlmetrics.Registry.MustRegister(flux.Collectors()...)
}

// ObserveReconcile records one reconcile's duration.
func ObserveReconcile(result string, d time.Duration) {
	reconcileDuration.WithLabelValues(result).Observe(d.Seconds())
}

// CountRun records one terraform run's outcome.
func CountRun(action string, err error) {
	result := "success"
	if err != nil {
		result = "failure"
	}
	runs.WithLabelValues(action, result).Inc()
}

// SetObjectState records whether an object has a pending plan and drift.
func SetObjectState(namespace, name string, pending, isDrifted bool) {
	pendingPlans.WithLabelValues(namespace, name).Set(boolValue(pending))
	drifted.WithLabelValues(namespace, name).Set(boolValue(isDrifted))
}

// ForgetObject drops a deleted object's series.
func ForgetObject(namespace, name string) {
	pendingPlans.DeleteLabelValues(namespace, name)
	drifted.DeleteLabelValues(namespace, name)
}

// CountLockRecovered records a state lock released after its holder was
// proved gone.
func CountLockRecovered() { locksRecovered.Inc() }

// Object is what the gotk_* series need of a reconciled object.
type Object interface {
	GetName() string
	GetNamespace() string
	GetConditions() []metav1.Condition
}

// RecordFluxReconcile records a reconcile of obj (of the given kind) that
// began at start: its duration, its Ready, Reconciling and Stalled
// conditions (Unknown when absent, as Flux records them) and whether it is
// suspended.
func RecordFluxReconcile(kind string, obj Object, suspended bool, start time.Time) {
	ref := corev1.ObjectReference{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	flux.RecordDuration(ref, start)
	flux.RecordSuspend(ref, suspended)
	for _, t := range fluxConditions {
		c := metav1.Condition{Type: t, Status: metav1.ConditionUnknown}
		if found := apimeta.FindStatusCondition(obj.GetConditions(), t); found != nil {
			c = *found
		}
		flux.RecordCondition(ref, c)
	}
}

// ForgetFluxObject drops a deleted object's gotk_* series.
func ForgetFluxObject(kind, namespace, name string) {
	ref := corev1.ObjectReference{Kind: kind, Namespace: namespace, Name: name}
	flux.DeleteDuration(ref)
	flux.DeleteSuspend(ref)
	for _, t := range fluxConditions {
		flux.DeleteCondition(ref, t)
	}
}

// ObserveRunnerStart records how long a runner took to answer.
func ObserveRunnerStart(placement string, d time.Duration) {
	runnerStart.WithLabelValues(placement).Observe(d.Seconds())
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
