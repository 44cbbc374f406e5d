package statelock

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestPodGoneGiven(t *testing.T) {
	h := &PodHolder{Namespace: "ns", Name: "db-runner-abcde", UID: "uid-1"}
	pod := func(uid string, phase corev1.PodPhase, deleting bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-1"}, Status: corev1.PodStatus{Phase: phase}}
		p.UID = types.UID(uid)
		if deleting {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	for _, tt := range []struct {
		name string
		pod  *corev1.Pod
		gone bool
		how  string
	}{
		{"no such Pod", nil, true, "no longer exists"},
		{"another Pod of that name", pod("uid-2", corev1.PodRunning, false), true, "was replaced by another Pod of that name"},
		{"failed", pod("uid-1", corev1.PodFailed, false), true, "has terminated (Failed)"},
		{"succeeded", pod("uid-1", corev1.PodSucceeded, false), true, "has terminated (Succeeded)"},
		{"running", pod("uid-1", corev1.PodRunning, false), false, ""},
		{"being deleted, still running", pod("uid-1", corev1.PodRunning, true), false, ""},
		{"pending", pod("uid-1", corev1.PodPending, false), false, ""},
	} {
		gone, how := h.GoneGiven(tt.pod)
		if gone != tt.gone || how != tt.how {
			t.Errorf("%s: gone=%v %q, want %v %q", tt.name, gone, how, tt.gone, tt.how)
		}
	}
}
