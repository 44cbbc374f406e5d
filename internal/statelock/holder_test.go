package statelock

import (
	"context"
	"errors"
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

// Look proves a runner Pod gone only by reading it in the locked object's
// namespace: a lock naming a Pod elsewhere proves nothing, even when no
// such Pod exists (releasing on it would hand the state to a second
// writer), and it is not even read.
func TestPodLook(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	live := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-runner-live1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "runner", Image: "runner"}}}}
	if err := env.Client.Create(ctx, live); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		holder  PodHolder
		gone    bool
		how     string
		outside bool
	}{
		{name: "the Pod exists", holder: PodHolder{Namespace: ns, Name: live.Name, UID: string(live.UID)}},
		{name: "no such Pod", holder: PodHolder{Namespace: ns, Name: "db-runner-gone1", UID: "uid-gone"}, gone: true, how: "no longer exists"},
		{name: "replaced", holder: PodHolder{Namespace: ns, Name: live.Name, UID: "uid-before"}, gone: true, how: "was replaced by another Pod of that name"},
		{name: "another namespace, no such Pod", holder: PodHolder{Namespace: "elsewhere", Name: "db-runner-gone1", UID: "uid-gone"}, outside: true},
	} {
		gone, how, _, err := tt.holder.Look(ctx, func(ctx context.Context, key types.NamespacedName, pod *corev1.Pod) error {
			return env.Client.Get(ctx, key, pod)
		}, ns)
		if gone != tt.gone || how != tt.how || errors.Is(err, ErrOutsideNamespace) != tt.outside || (err != nil) != tt.outside {
			t.Errorf("%s: gone=%v %q err=%v; want gone=%v %q, outside the namespace %v", tt.name, gone, how, err, tt.gone, tt.how, tt.outside)
		}
	}
}
