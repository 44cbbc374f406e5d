package cli

import (
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// TestJudge covers what the wait decides from one reading of the object,
// beyond the runs that TestReconcileWait plays.
func TestJudge(t *testing.T) {
	const requested = "2026-03-02T10:00:00.000000001Z"
	handled := func(set ...func(*v1alpha1.Terraform)) *v1alpha1.Terraform {
		obj := &v1alpha1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", Generation: 2}}
		obj.Status.ObservedGeneration = 2
		obj.Status.LastHandledReconcileAt = requested
		for _, s := range set {
			s(obj)
		}
		for i := range obj.Status.Conditions {
			obj.Status.Conditions[i].ObservedGeneration = obj.Generation
		}
		return obj
	}
	ready := func(status metav1.ConditionStatus, reason string) func(*v1alpha1.Terraform) {
		return func(obj *v1alpha1.Terraform) {
			setCondition(obj, condition(meta.ReadyCondition, status, reason, "message of "+reason, 0))
		}
	}
	for _, tt := range []struct {
		name  string
		until string
		obj   *v1alpha1.Terraform
		// runBefore is the run in flight when the request was made.
		runBefore string
		want      verdict
	}{
		{name: "not handled yet", obj: handled(ready(metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason), func(obj *v1alpha1.Terraform) {
			obj.Status.LastHandledReconcileAt = "earlier"
		}), want: stillWaiting},
		{name: "ready", obj: handled(ready(metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)), want: verdictReady},
		{name: "ready of an older generation", obj: handled(ready(metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason), func(obj *v1alpha1.Terraform) {
			obj.Status.ObservedGeneration = 1
		}), want: stillWaiting},
		{name: "ready condition of an older generation", obj: func() *v1alpha1.Terraform {
			obj := handled(ready(metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason))
			obj.Status.Conditions[0].ObservedGeneration = 1
			return obj
		}(), want: stillWaiting},
		{name: "deleting", obj: handled(ready(metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason), func(obj *v1alpha1.Terraform) {
			obj.DeletionTimestamp = ago(0)
		}), want: verdictFailed},
		{name: "queued", obj: handled(ready(metav1.ConditionUnknown, v1alpha1.RunQueuedReason)), want: stillWaiting},
		{name: "source not ready, retried", obj: handled(ready(metav1.ConditionFalse, v1alpha1.SourceNotReadyReason), func(obj *v1alpha1.Terraform) {
			setCondition(obj, condition(meta.ReconcilingCondition, metav1.ConditionTrue, progressingWithRetry, "retrying", 0))
		}), want: stillWaiting},
		{name: "apply failed, retried", obj: handled(ready(metav1.ConditionFalse, v1alpha1.ApplyFailedReason), func(obj *v1alpha1.Terraform) {
			setCondition(obj, condition(meta.ReconcilingCondition, metav1.ConditionTrue, progressingWithRetry, "retrying", 0))
		}), want: verdictFailed},
		{name: "destructive plan held", obj: handled(ready(metav1.ConditionFalse, v1alpha1.DestructivePlanPendingReason)), want: stillWaiting},
		{name: "destructive plan held, until planned", until: untilPlanned, obj: handled(ready(metav1.ConditionFalse, v1alpha1.DestructivePlanPendingReason)), want: verdictApproval},
		{name: "apply of the new plan, until planned", until: untilPlanned, obj: handled(ready(metav1.ConditionUnknown, v1alpha1.RunInProgressReason), func(obj *v1alpha1.Terraform) {
			obj.Status.Run = &v1alpha1.RunStatus{ID: "run-2", Action: runApply}
		}), runBefore: "run-1", want: verdictPlanned},
		{name: "apply in flight before the request, until planned", until: untilPlanned, obj: handled(ready(metav1.ConditionUnknown, v1alpha1.RunInProgressReason), func(obj *v1alpha1.Terraform) {
			obj.Status.Run = &v1alpha1.RunStatus{ID: "run-1", Action: runApply}
		}), runBefore: "run-1", want: stillWaiting},
		{name: "apply of the new plan", obj: handled(ready(metav1.ConditionUnknown, v1alpha1.RunInProgressReason), func(obj *v1alpha1.Terraform) {
			obj.Status.Run = &v1alpha1.RunStatus{ID: "run-2", Action: runApply}
		}), want: stillWaiting},
		{name: "planOnly with changes, until planned", until: untilPlanned, obj: handled(ready(metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason), func(obj *v1alpha1.Terraform) {
			obj.Spec.PlanOnly = true
			obj.Status.Plan = &v1alpha1.PlanStatus{ID: pendingPlan, Pending: pendingPlan, Add: 1}
		}), want: verdictPlanned},
		{name: "planOnly with changes", obj: handled(ready(metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason), func(obj *v1alpha1.Terraform) {
			obj.Spec.PlanOnly = true
			obj.Status.Plan = &v1alpha1.PlanStatus{ID: pendingPlan, Pending: pendingPlan, Add: 1}
		}), want: verdictReady},
	} {
		t.Run(tt.name, func(t *testing.T) {
			until := tt.until
			if until == "" {
				until = untilReady
			}
			got := watcher{requested: requested, until: until, runBefore: tt.runBefore}.judge(tt.obj)
			if got.verdict != tt.want {
				r := apimeta.FindStatusCondition(tt.obj.Status.Conditions, meta.ReadyCondition)
				t.Errorf("verdict %q (%s), want %q; Ready %+v", got.verdict, got.step, tt.want, r)
			}
		})
	}
}
