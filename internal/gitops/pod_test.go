package gitops

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestPodReadyAndWaitingReason(t *testing.T) {
	creating := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{
		{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
	}}}
	ready := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue},
	}}}
	unready := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionFalse},
	}}}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		ready   bool
		waiting string
	}{
		{"creating", creating, false, "ContainerCreating"},
		{"pending without statuses", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, false, "Pending"},
		{"ready", ready, true, ""},
		{"running, not ready", unready, false, ""},
	} {
		if got := PodReady(tc.pod); got != tc.ready {
			t.Errorf("%s: PodReady = %v, want %v", tc.name, got, tc.ready)
		}
		if got := WaitingReason(tc.pod); got != tc.waiting {
			t.Errorf("%s: WaitingReason = %q, want %q", tc.name, got, tc.waiting)
		}
	}
}
