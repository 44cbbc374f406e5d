package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// Describe reads typed and unstructured objects alike: what a failure
// message needs of a Terraform object and of a Kustomization.
func TestDescribe(t *testing.T) {
	now := metav1.Now()
	tf := &v1alpha1.Terraform{ObjectMeta: metav1.ObjectMeta{Generation: 3, DeletionTimestamp: &now, Finalizers: []string{"infra.landform.dev/finalizer"}}}
	tf.Status.ObservedGeneration = 2
	tf.Status.LastAppliedRevision = "main@sha1:abc"
	tf.Status.LastAppliedPlan = "plan-1"
	tf.Status.LastAttemptedRevision = "main@sha1:def"
	tf.Status.Plan = &v1alpha1.PlanStatus{ID: "plan-2", Pending: "plan-2", Revision: "main@sha1:def", Add: 1, IsDrift: true}
	tf.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionFalse, Reason: "PlanPending", Message: "waiting"}}
	want := `generation 3 observed 2; applied main@sha1:abc (plan plan-1), attempted main@sha1:def; ` +
		`plan plan-2 pending="plan-2" rev main@sha1:def +1 ~0 -0 (drift); Ready=False (PlanPending: waiting); ` +
		`deleting since ` + now.UTC().Format("15:04:05") + `, finalizers [infra.landform.dev/finalizer]`
	if got := Describe(tf); got != want {
		t.Errorf("Describe(Terraform)\n got %s\nwant %s", got, want)
	}

	ks := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "infra", "generation": int64(1)},
		"status": map[string]any{
			"observedGeneration": int64(1),
			"conditions":         []any{map[string]any{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded", "message": "Applied"}},
		},
	}}
	if got, want := Describe(ks), "generation 1 observed 1; Ready=True (ReconciliationSucceeded: Applied)"; got != want {
		t.Errorf("Describe(Kustomization)\n got %s\nwant %s", got, want)
	}
}

// On a real API server: DeleteAndWait waits out a finalizer and says what
// holds the object when it times out; Events tells an object's events
// from those of an earlier object of the same name.
func TestDeleteAndWaitAndEvents(t *testing.T) {
	e, err := Start()
	SkipOrFail(t, err)
	defer func() { _ = e.Stop() }()
	ctx := context.Background()
	ns := e.Namespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held", Finalizers: []string{"example.com/hold"}}}
	if err := e.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	err = DeleteAndWait(ctx, e.Client, cm, time.Second, 100*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "waiting for ConfigMap held to be gone") || !strings.Contains(err.Error(), "finalizers [example.com/hold]") {
		t.Fatalf("want a timeout naming the finalizer, got %v", err)
	}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
		t.Fatal(err)
	}
	cm.Finalizers = nil
	if err := e.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := DeleteAndWait(ctx, e.Client, cm, 10*time.Second, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}

	for i, uid := range []types.UID{"earlier", "current"} {
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("held.%d", i)},
			InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: ns, Name: "held", UID: uid},
			Reason:         "Held", Message: string(uid),
		}
		if err := e.Client.Create(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	byUID := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held", UID: "current"}}
	byName := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held"}}
	for _, tc := range []struct {
		obj    client.Object
		reason string
		want   []string
	}{
		{byUID, "Held", []string{"current"}},
		{byName, "Held", []string{"earlier", "current"}},
		{byName, "Other", nil},
	} {
		got, err := Events(ctx, e.Client, tc.obj, tc.reason)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("Events(%s, uid %q, %s) = %v, want %v", tc.obj.GetName(), tc.obj.GetUID(), tc.reason, got, tc.want)
		}
	}
}
