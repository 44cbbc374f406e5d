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
	reconcileDuration = histogram("landform_reconcile_duration_seconds",
		"Duration of Terraform reconciles by result (success, progressing, waiting, stalled, retry).",
		"result", 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)

	runs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "landform_runs_total",
		Help: "Terraform runs by action (plan, apply, destroy, outputs) and result (success, failure).",
	}, []string{"action", "result"})

	pendingPlans = objectGauge("landform_plan_pending",
		"1 while a Terraform object has a plan waiting for approval.")

	drifted = objectGauge("landform_drifted",
		"1 while a Terraform object's last drift check found drift.")

	runnerStart = histogram("landform_runner_start_seconds",
		"Time from asking for a runner to its health check answering, by placement (local, pod).",
		"placement", 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120)

	runnerPodsKept = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "landform_runner_pods_kept",
		Help: "Runner Pods recycled and kept for the next run of an object of their namespace (--runner-pod-reuse).",
	})

	runnerPodsReused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "landform_runner_pods_reused_total",
		Help: "Runners started by reusing a kept runner Pod instead of creating one (--runner-pod-reuse).",
	})

	stateUnsaved = objectGauge("landform_state_unsaved",
		"1 while a Terraform object has a state its engine could not write to the backend and Landform has not written yet (kept by its runner or in Secret tfunsaved-<name>-0).")

	// perObject are the series of one Terraform object, dropped with it.
	perObject = []*prometheus.GaugeVec{pendingPlans, drifted, stateUnsaved}

	locksRecovered = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "landform_state_locks_recovered_total",
		Help: "State locks released because the runner holding them was proved gone.",
	})

	// flux records gotk_reconcile_condition, gotk_reconcile_duration_seconds
	// and gotk_suspend_status as every Flux controller does. Registered once
	// per process: tests and `landform dev` start several managers.
	flux = fluxmetrics.NewRecorder()
)

// histogram is a histogram of seconds by one label.
func histogram(name, help, label string, buckets ...float64) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, []string{label})
}

// objectGauge is a 0 or 1 per Terraform object.
func objectGauge(name, help string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"namespace", "name"})
}

func init() {
	ctrlmetrics.Registry.MustRegister(reconcileDuration, runs, pendingPlans, drifted, runnerStart, locksRecovered, stateUnsaved, runnerPodsKept, runnerPodsReused)
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
	for _, g := range perObject {
		g.DeleteLabelValues(namespace, name)
	}
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

// SetRunnerPodsKept records how many recycled runner Pods wait for a run.
func SetRunnerPodsKept(n int) { runnerPodsKept.Set(float64(n)) }

// CountRunnerPodReused records a runner started on a kept runner Pod.
func CountRunnerPodReused() { runnerPodsReused.Inc() }

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
