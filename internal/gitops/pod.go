package gitops

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// An application installed with its infrastructure mounts the outputs
// Secret: its Pod waits until Landform writes it. These say what the
// kubelet reports meanwhile, for the walkthrough on a real node and the
// real-cluster suite.

// PodReady reports whether pod's Ready condition is true.
func PodReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// WaitingReason is the first waiting container's reason, "Pending" for a
// Pending Pod without container statuses, "" otherwise.
func WaitingReason(pod *corev1.Pod) string {
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Waiting != nil {
			return s.State.Waiting.Reason
		}
	}
	if pod.Status.Phase == corev1.PodPending {
		return "Pending"
	}
	return ""
}

// SecretMountFailure returns the message of the kubelet's FailedMount
// event on pod saying that Secret secret does not exist, "" when there is
// none (yet).
func SecretMountFailure(ctx context.Context, c client.Reader, pod *corev1.Pod, secret string) (string, error) {
	var events corev1.EventList
	if err := c.List(ctx, &events, client.InNamespace(pod.Namespace)); err != nil {
		return "", err
	}
	for _, ev := range events.Items {
		if ev.InvolvedObject.UID == pod.UID && ev.Reason == "FailedMount" && strings.Contains(ev.Message, `secret "`+secret+`" not found`) {
			return ev.Message, nil
		}
	}
	return "", nil
}
