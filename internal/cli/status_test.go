package cli

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

func TestStatus(t *testing.T) {
	ns := namespace(t, "status")
	objs := fixtureStates(t, ns, "status")
	storePlan(t, objs[objPending], pendingPlan, rev2, false)
	for i, e := range []struct {
		typ, reason, message string
		age                  time.Duration
		count                int32
	}{
		{corev1.EventTypeNormal, v1alpha1.PlannedWithChangesReason, "plan " + appliedPlan + " for revision " + rev1 + ": +3 ~0 -0", 50 * time.Minute, 1},
		{corev1.EventTypeNormal, v1alpha1.AppliedReason, "applied plan " + appliedPlan, 49 * time.Minute, 1},
		{corev1.EventTypeWarning, v1alpha1.PlanFailedReason, "terraform plan failed: Error: Unsupported argument", 20 * time.Minute, 3},
		{corev1.EventTypeNormal, v1alpha1.PlannedWithChangesReason, "plan " + pendingPlan + " for revision " + rev2 + ": +2 ~1 -2", 5 * time.Minute, 1},
	} {
		event(t, objs[objPending], fmt.Sprintf("pending.%d", i), e.typ, e.reason, e.message, e.age, e.count)
	}
	// Another object's event is not shown.
	event(t, objs[objReady], "ready.0", corev1.EventTypeNormal, v1alpha1.AppliedReason, "applied plan "+appliedPlan, 49*time.Minute, 1)

	terraform(t, ns, "approved", func(obj *v1alpha1.Terraform) {
		obj.Annotations = map[string]string{v1alpha1.ApproveAnnotation: pendingPlan}
		pending(obj)
	})
	terraform(t, ns, "plan-only", func(obj *v1alpha1.Terraform) {
		obj.Spec.PlanOnly = true
		pending(obj)
	})
	// approvePlan auto applies a plan that destroys nothing: between the
	// plan and its apply, status says so, not that it waits for a person.
	terraform(t, ns, "auto-applying", func(obj *v1alpha1.Terraform) {
		obj.Spec.ApprovePlan = v1alpha1.ApprovePlanAuto
		applied(obj)
		pending(obj)
		p := obj.Status.Plan
		p.Destroy, p.Replace, p.ResourcesToDestroy, p.ResourcesToReplace = 0, 0, nil, nil
		started := metav1.NewTime(now.Add(-time.Second))
		obj.Status.Run = &v1alpha1.RunStatus{ID: "run-fedcba9876543210", Action: "apply", Runner: "Pod default/auto-applying-runner-x7k2p", Started: &started, Revision: rev2}
		msg := "apply run run-fedcba9876543210 in progress on Pod default/auto-applying-runner-x7k2p (revision " + rev2 + ")"
		setCondition(obj, condition(v1alpha1.PlannedCondition, metav1.ConditionTrue, v1alpha1.PlannedWithChangesReason, "plan "+pendingPlan+" for revision "+rev2+": +2 ~1 -0", 5*time.Minute))
		setCondition(obj, condition(meta.ReadyCondition, metav1.ConditionUnknown, v1alpha1.RunInProgressReason, msg, time.Second))
		setCondition(obj, condition(meta.ReconcilingCondition, metav1.ConditionTrue, v1alpha1.RunInProgressReason, msg, time.Second))
	})
	held := terraform(t, ns, "destructive", heldDestructive)
	storePlan(t, held, pendingPlan, rev2, false)
	for _, name := range []string{objPending, objLocked, objFailed, objRunning, objNew, objSuspended, objReady, "approved", "auto-applying", "plan-only", "destructive"} {
		t.Run(name, func(t *testing.T) {
			golden(t, "status/"+name, normalize(run(t, "", "status", "-n", ns, name).transcript()))
		})
	}
	t.Run("json", func(t *testing.T) {
		golden(t, "status/pending-json", normalize(run(t, "", "status", "-n", ns, objPending, "-o", "json").transcript()))
	})
	t.Run("yaml", func(t *testing.T) {
		golden(t, "status/running-yaml", normalize(run(t, "", "status", "-n", ns, objRunning, "-o", "yaml").transcript()))
	})
	t.Run("not-found", func(t *testing.T) {
		golden(t, "status/not-found", run(t, "", "status", "-n", ns, "missing").transcript())
	})
	t.Run("no-name", func(t *testing.T) {
		golden(t, "status/no-name", run(t, "", "status", "-n", ns).transcript())
	})
}

// event records an event about obj as the controller's recorder does.
func event(t *testing.T, obj *v1alpha1.Terraform, name, typ, reason, message string, age time.Duration, count int32) {
	t.Helper()
	e := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: name},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.TerraformKind,
			Namespace: obj.Namespace, Name: obj.Name, UID: obj.UID,
		},
		Type: typ, Reason: reason, Message: message, Count: count,
		FirstTimestamp: *ago(age + time.Minute), LastTimestamp: *ago(age),
		Source: corev1.EventSource{Component: "landform-controller"},
	}
	if err := env.Client.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
}
