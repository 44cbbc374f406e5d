package outcome

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// TestOutcome checks, for each way a reconcile ends, the one mapping to
// what comes next: result, reason, metric, kstatus conditions and whether
// the generation counts as observed.
func TestOutcome(t *testing.T) {
	const success, retryAfter = 10 * time.Minute, 30 * time.Second
	type cond struct {
		status metav1.ConditionStatus
		reason string
	}
	cases := []struct {
		name        string
		done        Outcome
		err         error
		result      ctrl.Result
		metric      string
		ready       cond
		reconciling *cond
		stalled     *cond
		observed    bool
	}{
		{name: "success", done: Done(success), result: ctrl.Result{RequeueAfter: success}, metric: "success",
			ready: cond{metav1.ConditionTrue, infrav1.ReconciliationSucceededReason}, observed: true},
		{name: "in progress", done: Progress(infrav1.RunInProgressReason, time.Hour, "plan run r1 in progress"),
			result: ctrl.Result{RequeueAfter: time.Hour}, metric: "progressing",
			ready:       cond{metav1.ConditionUnknown, infrav1.RunInProgressReason},
			reconciling: &cond{metav1.ConditionTrue, infrav1.RunInProgressReason}},
		{name: "stalled", err: Stalling(infrav1.ArtifactFailedReason, "no such path"), result: ctrl.Result{}, metric: "stalled",
			ready:   cond{metav1.ConditionFalse, infrav1.ArtifactFailedReason},
			stalled: &cond{metav1.ConditionTrue, infrav1.ArtifactFailedReason}, observed: true},
		{name: "waiting", err: WaitingFor(infrav1.PlanPendingReason, time.Minute, "approve it"),
			result: ctrl.Result{RequeueAfter: time.Minute}, metric: "waiting",
			ready: cond{metav1.ConditionFalse, infrav1.PlanPendingReason}, observed: true},
		{name: "retry", err: Retry(infrav1.ApplyFailedReason, "apply failed"), result: ctrl.Result{RequeueAfter: retryAfter}, metric: "retry",
			ready:       cond{metav1.ConditionFalse, infrav1.ApplyFailedReason},
			reconciling: &cond{metav1.ConditionTrue, infrav1.ProgressingWithRetryReason}},
		{name: "wrapped keeps its kind", err: fmt.Errorf("collecting: %w", WaitingFor(infrav1.StateLockedReason, time.Minute, "locked")),
			result: ctrl.Result{RequeueAfter: time.Minute}, metric: "waiting",
			ready: cond{metav1.ConditionFalse, infrav1.StateLockedReason}, observed: true},
		{name: "nothing returned is done, looked at when something changes", result: ctrl.Result{}, metric: "success",
			ready: cond{metav1.ConditionTrue, infrav1.ReconciliationSucceededReason}, observed: true},
		{name: "an error ends the reconcile whatever a step returned beside it",
			done: Progress(infrav1.RunQueuedReason, time.Hour, "queued"), err: Retry(infrav1.ApplyFailedReason, "apply failed"),
			result: ctrl.Result{RequeueAfter: retryAfter}, metric: "retry",
			ready:       cond{metav1.ConditionFalse, infrav1.ApplyFailedReason},
			reconciling: &cond{metav1.ConditionTrue, infrav1.ProgressingWithRetryReason}},
		{name: "untyped error is retried with the fallback reason", err: errors.New("connection refused"),
			result: ctrl.Result{RequeueAfter: retryAfter}, metric: "retry",
			ready:       cond{metav1.ConditionFalse, infrav1.RunnerFailedReason},
			reconciling: &cond{metav1.ConditionTrue, infrav1.ProgressingWithRetryReason}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := &infrav1.Terraform{}
			obj.Generation = 3
			obj.Status.ObservedGeneration = -1
			// Left over from the reconcile before: summarize replaces them.
			conditions.MarkStalled(obj, "Old", "old")
			conditions.MarkReconciling(obj, "Old", "old")

			o := Ended(tc.done, tc.err, infrav1.RunnerFailedReason)
			g.Expect(o.Result(retryAfter)).To(Equal(tc.result))
			g.Expect(o.Metric()).To(Equal(tc.metric))
			o.Summarize(obj, "applied")

			expect := func(t string, want *cond) {
				c := conditions.Get(obj, t)
				if want == nil {
					g.Expect(c).To(BeNil(), t)
					return
				}
				g.Expect(c).NotTo(BeNil(), t)
				g.Expect(c.Status).To(Equal(want.status), t)
				g.Expect(c.Reason).To(Equal(want.reason), t)
			}
			expect(meta.ReadyCondition, &tc.ready)
			expect(meta.ReconcilingCondition, tc.reconciling)
			expect(meta.StalledCondition, tc.stalled)
			g.Expect(obj.Status.ObservedGeneration == obj.Generation).To(Equal(tc.observed), "observedGeneration")
		})
	}
}

// A reconcile that follows a run recorded before it leaves a reconcile
// request unhandled; any other marks it handled.
func TestSummarizeHandlesARequestUnlessFollowing(t *testing.T) {
	obj := &infrav1.Terraform{}
	obj.Annotations = map[string]string{meta.ReconcileRequestAnnotation: "asked"}
	following := Progress(infrav1.RunInProgressReason, time.Minute, "apply run r1 in progress")
	following.Following = true
	following.Summarize(obj, "")
	if got := obj.Status.LastHandledReconcileAt; got != "" {
		t.Errorf("following a run: lastHandledReconcileAt %q, want it unhandled", got)
	}
	Progress(infrav1.RunQueuedReason, time.Minute, "plan run r2 queued").Summarize(obj, "")
	if got := obj.Status.LastHandledReconcileAt; got != "asked" {
		t.Errorf("starting a run: lastHandledReconcileAt %q, want %q", got, "asked")
	}
}
