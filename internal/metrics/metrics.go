// Package metrics holds Landform's Prometheus metrics and Flux's
// gotk_reconcile_* series (fluxcd/pkg/runtime/metrics, which Flux's
// dashboards read), registered with controller-runtime's registry so they are
// served on the manager's metrics endpoint. Labels carry names and outcomes
// only, never values. Queue depth comes from controller-runtime itself:
// workqueue_depth{name="terraform"}. docs/metrics.md is the reference.
package metrics

import (
	"time"

	fluxmetrics "github.com/fluxcd/pkg/runtime/metrics"
	"github.com/prometheus/client_golang/prometheus"
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

	stateUnsaved = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "landform_state_unsaved",
		Help: "1 while a Terraform object has a state its engine could not write to the backend and Landform has not written yet (kept by its runner or in Secret tfstate-unsaved-<name>-0).",
	}, []string{"namespace", "name"})

	locksRecovered = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "landform_state_locks_recovered_total",
		Help: "State locks released because the runner holding them was proved gone.",
	})

	// flux records gotk_reconcile_condition, gotk_reconcile_duration_seconds
	// and gotk_suspend_status as every Flux controller does. Registered once
	// per process: tests and `landform dev` start several managers.
	flux = fluxmetrics.NewRecorder()
)

func init() {
	ctrlmetrics.Registry.MustRegister(reconcileDuration, runs, pendingPlans, drifted, runnerStart, locksRecovered, stateUnsaved)
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
	stateUnsaved.DeleteLabelValues(namespace, name)
}

// SetStateUnsaved records whether an object has a state its engine could
// not write to the backend that Landform has not written yet.
func SetStateUnsaved(namespace, name string, unsaved bool) {
	stateUnsaved.WithLabelValues(namespace, name).Set(boolValue(unsaved))
}

// CountLockRecovered records a state lock released after its holder was
// proved gone.
func CountLockRecovered() { locksRecovered.Inc() }

// Flux is the recorder of Flux's gotk_* series, for fluxcd/pkg/runtime's
// controller.Metrics.
func Flux() *fluxmetrics.Recorder { return flux }

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
