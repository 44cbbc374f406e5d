package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// podEvent records an event about the Pod pod as the kubelet does; the
// Pod need not exist (events outlive it).
func podEvent(t *testing.T, ns, pod, name, typ, reason, message string, age time.Duration) {
	t.Helper()
	e := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: name},
		InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: pod},
		Type:           typ, Reason: reason, Message: message, Count: 1,
		FirstTimestamp: *ago(age), LastTimestamp: *ago(age),
		Source: corev1.EventSource{Component: "kubelet"},
	}
	if err := env.Client.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
}

func TestEvents(t *testing.T) {
	ns := namespace(t, "events")
	db := terraform(t, ns, "db", applied)
	other := terraform(t, ns, "db-runner", applied)
	terraform(t, ns, "quiet", nil)

	event(t, db, "db.1", corev1.EventTypeNormal, v1alpha1.PlannedWithChangesReason, "plan "+appliedPlan+" for revision "+rev1+": +3 ~0 -0", 20*time.Minute, 1)
	podEvent(t, ns, "db-runner-x7k2p", "db-runner-x7k2p.1", corev1.EventTypeNormal, "Pulled", "Container image \"ghcr.io/landform-dev/landform-runner:v0.5.0\" already present on machine", 15*time.Minute)
	event(t, db, "db.2", corev1.EventTypeWarning, v1alpha1.PlanFailedReason, "terraform plan failed:\nError: Invalid reference", 5*time.Minute, 3)
	// Neither another object's nor its runner Pods' events.
	event(t, other, "db-runner.1", corev1.EventTypeNormal, v1alpha1.PlannedWithChangesReason, "not about db", 10*time.Minute, 1)
	podEvent(t, ns, "db-runner-runner-abcde", "db-runner-runner-abcde.1", corev1.EventTypeNormal, "Pulled", "not about db", 10*time.Minute)
	podEvent(t, ns, "db-x7k2p", "db-x7k2p.1", corev1.EventTypeNormal, "Pulled", "not a runner Pod", 10*time.Minute)

	for _, tt := range []struct {
		golden string
		args   []string
	}{
		{"events/list", []string{"events", "-n", ns, "db"}},
		{"events/none", []string{"events", "-n", ns, "quiet"}},
		{"events/not-found", []string{"events", "-n", ns, "missing"}},
		{"events/no-name", []string{"events", "-n", ns}},
		{"events/warnings", []string{"events", "-n", ns, "--types", "Warning"}},
		{"events/json", []string{"events", "-n", ns, "db", "-o", "json"}},
		{"events/bad-type", []string{"events", "-n", ns, "--types", "Error"}},
		{"events/name-and-all", []string{"events", "-A", "db"}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			golden(t, tt.golden, normalize(run(t, "", tt.args...).transcript()))
		})
	}

	// -A: every namespace's, with the namespace; flux's --types.
	r := run(t, "", "events", "-A", "--types", "Warning")
	if r.err != nil || !strings.Contains(r.stdout, "NAMESPACE") || !strings.Contains(r.stdout, ns+" ") || !strings.Contains(r.stdout, "Invalid reference") || strings.Contains(r.stdout, "Pulled") {
		t.Errorf("events -A --types Warning:\n%s", r.transcript())
	}

	t.Run("events/watch", func(t *testing.T) {
		b := start(t, "events", "-n", ns, "db", "-w")
		b.waitOutput(t, func(s string) bool { return strings.Contains(s, "Invalid reference") })
		podEvent(t, ns, "db-runner-q9z8w", "db-runner-q9z8w.1", corev1.EventTypeNormal, "Started", "Started container runner", 0)
		event(t, other, "db-runner.2", corev1.EventTypeNormal, v1alpha1.PlannedWithChangesReason, "not about db", 0, 1)
		event(t, db, "db.3", corev1.EventTypeNormal, v1alpha1.AppliedReason, "applied plan "+pendingPlan, 0, 1)
		b.waitOutput(t, func(s string) bool { return strings.Contains(s, "applied plan "+pendingPlan) })
		golden(t, "events/watch", b.stop(t).transcript())
	})
}
