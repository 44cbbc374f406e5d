package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

func TestReplan(t *testing.T) {
	ns := namespace(t, "replan")
	for _, tt := range []struct {
		name      string
		state     func(*v1alpha1.Terraform)
		requested bool
	}{
		{objReady, states[objReady], true},
		{objPending, states[objPending], true},
		{"no-drift-detection", func(obj *v1alpha1.Terraform) { obj.Spec.DisableDriftDetection = true; applied(obj) }, true},
		{objSuspended, states[objSuspended], false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := terraform(t, ns, tt.name, tt.state)
			before := snapshot(t, obj)
			r := run(t, "", "replan", "-n", ns, tt.name)
			golden(t, "replan/"+tt.name, r.transcript())
			after := snapshot(t, obj)
			requested, _, _ := unstructured.NestedString(after, "metadata", "annotations", meta.ReconcileRequestAnnotation)
			if (requested != "") != tt.requested {
				t.Errorf("requestedAt = %q", requested)
			}
			if tt.requested {
				if _, err := time.Parse(time.RFC3339Nano, requested); err != nil {
					t.Errorf("requestedAt %q: %v", requested, err)
				}
			}
			onlyAnnotationChanged(t, before, after, meta.ReconcileRequestAnnotation, "")
		})
	}
}

// TestReconcileWait plays the controller while `reconcile --wait` follows.
func TestReconcileWait(t *testing.T) {
	ns := namespace(t, "reconcile")
	for _, tt := range []struct {
		name   string
		state  func(*v1alpha1.Terraform)
		finish func(*v1alpha1.Terraform) // the outcome the controller writes
	}{
		{"ready", states[objReady], func(obj *v1alpha1.Terraform) {
			obj.Status.LastAppliedRevision = rev2
			setCondition(obj, condition(meta.ReadyCondition, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, "applied revision "+rev2, 0))
		}},
		{"failed", states[objReady], func(obj *v1alpha1.Terraform) {
			setCondition(obj, condition(meta.ReadyCondition, metav1.ConditionFalse, v1alpha1.PlanFailedReason, "terraform plan failed:\nError: Invalid reference", 0))
			setCondition(obj, condition(meta.ReconcilingCondition, metav1.ConditionTrue, progressingWithRetry, "retrying after: PlanFailed", 0))
		}},
		{"pending", states[objPending], func(obj *v1alpha1.Terraform) {}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := terraform(t, ns, tt.name, tt.state)
			cmd := start(t, "reconcile", "-n", ns, tt.name, "--wait")
			requested := waitRequested(t, obj)
			cmd.waitOutput(t, func(s string) bool { return strings.Contains(s, "◎ waiting for the controller") })

			// The intermediate progress patch: no handled request yet.
			setCondition(obj, condition(meta.ReconcilingCondition, metav1.ConditionTrue, v1alpha1.ProgressingReason, "running plan for revision "+rev2, 0))
			updateStatus(t, obj)
			cmd.waitOutput(t, func(s string) bool { return strings.Contains(s, "◎ running plan") })

			apimeta.RemoveStatusCondition(&obj.Status.Conditions, meta.ReconcilingCondition)
			tt.finish(obj)
			obj.Status.LastHandledReconcileAt = requested
			updateStatus(t, obj)
			golden(t, "reconcile/"+tt.name, cmd.result(t).transcript())
		})
	}

	t.Run("timeout", func(t *testing.T) {
		terraform(t, ns, "nobody-home", states[objReady])
		r := run(t, "", "reconcile", "-n", ns, "nobody-home", "--wait", "--timeout", "300ms")
		golden(t, "reconcile/timeout", r.transcript())
	})
	t.Run("no-wait", func(t *testing.T) {
		obj := terraform(t, ns, "no-wait", states[objReady])
		r := run(t, "", "reconcile", "-n", ns, "no-wait")
		golden(t, "reconcile/no-wait", r.transcript())
		waitRequested(t, obj)
	})
	t.Run("suspended", func(t *testing.T) {
		terraform(t, ns, objSuspended, states[objSuspended])
		golden(t, "reconcile/suspended", run(t, "", "reconcile", "-n", ns, objSuspended, "--wait").transcript())
	})
}

// waitRequested waits for the CLI's request and returns its value.
func waitRequested(t *testing.T, obj *v1alpha1.Terraform) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		if v := obj.GetAnnotations()[meta.ReconcileRequestAnnotation]; v != "" {
			return v
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no reconcile request")
	return ""
}

func updateStatus(t *testing.T, obj *v1alpha1.Terraform) {
	t.Helper()
	for i := range obj.Status.Conditions {
		obj.Status.Conditions[i].ObservedGeneration = obj.Generation
	}
	if err := env.Client.Status().Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

func TestSuspendResume(t *testing.T) {
	ns := namespace(t, "suspend")
	obj := terraform(t, ns, "database", states[objReady])
	suspended := func() bool {
		t.Helper()
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		return obj.Spec.Suspend
	}
	before := snapshot(t, obj)
	for i, step := range []struct {
		args []string
		want bool
	}{
		{[]string{"suspend", "-n", ns, "database"}, true},
		{[]string{"suspend", "-n", ns, "database"}, true},
		{[]string{"resume", "-n", ns, "database"}, false},
		{[]string{"resume", "-n", ns, "database"}, false},
	} {
		r := run(t, "", step.args...)
		golden(t, "suspend/step"+string(rune('1'+i)), r.transcript())
		if got := suspended(); got != step.want {
			t.Errorf("after %v: suspend = %v, want %v", step.args, got, step.want)
		}
	}
	// Suspending and resuming leave the object as it was, but for its generation.
	after := snapshot(t, obj)
	unstructured.RemoveNestedField(before, "metadata", "generation")
	unstructured.RemoveNestedField(after, "metadata", "generation")
	onlyAnnotationChanged(t, before, after, "none", "")
}
