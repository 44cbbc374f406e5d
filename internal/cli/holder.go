package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/statelock"
)

// Runner Pods are named <prefix>-runner-<5 random characters>
// (names.RunnerPodPrefix): the prefix is the object's name with dots made
// dashes, cut so that the whole name is a DNS label, because a Pod's
// hostname is its name. The backend records the lock holder as
// <user>@<hostname>, so a holder of that form whose Pod no longer exists is
// a runner that is gone.
const (
	// runnerPodName is the runner Pods' app.kubernetes.io/name label.
	runnerPodName = "landform-runner"
)

// holder says whether a lock holder is gone, and why Landform thinks so.
type holder struct {
	gone bool
	why  string
}

// holderState decides whether the lock's holder is gone. A Landform runner
// names itself in the lock info (its Pod, or its process); an older runner
// Pod is known by its hostname in Who (user@hostname). Only runners can be
// proved gone; any other holder may still run.
func holderState(ctx context.Context, s *session, obj *v1alpha1.Terraform, info lockInfo) holder {
	if h, ok := statelock.ParseHolder(statelock.LockInfo{Info: info.Info}); ok {
		return runnerState(ctx, s, obj, h)
	}
	who := info.Who
	at := strings.LastIndex(who, "@")
	host := who[at+1:]
	if at < 0 || host == "" {
		return holder{why: "unknown: the lock names no host, so Landform cannot tell whether its holder still runs"}
	}
	var pod corev1.Pod
	err := s.c.Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: host}, &pod)
	switch {
	case apierrors.IsNotFound(err) && isRunnerHost(host, obj):
		return holder{gone: true, why: fmt.Sprintf("gone: runner Pod %s no longer exists", host)}
	case apierrors.IsNotFound(err):
		return holder{why: fmt.Sprintf("unknown: %s is not a runner Pod of %s/%s (a local runner or someone's own terraform?), so Landform cannot tell whether it still runs", host, obj.Namespace, obj.Name)}
	case err != nil:
		return holder{why: fmt.Sprintf("unknown: Pod %s could not be read (%v)", host, s.explain(err, "get", resPods, "Pod", obj.Namespace, host))}
	case !isRunnerPod(&pod, obj):
		return holder{why: fmt.Sprintf("alive: Pod %s exists and is not a runner of %s/%s", host, obj.Namespace, obj.Name)}
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return holder{gone: true, why: fmt.Sprintf("gone: runner Pod %s has terminated (%s)", host, pod.Status.Phase)}
	}
	return holder{why: fmt.Sprintf("alive: runner Pod %s is %s", host, orDash(string(pod.Status.Phase)))}
}

// isRunnerPod reports a Pod Landform runs for obj: labelled as runner
// Pods of obj are, or owned by obj.
func isRunnerPod(pod *corev1.Pod, obj *v1alpha1.Terraform) bool {
	for _, ref := range pod.OwnerReferences {
		if ref.UID == obj.UID && ref.Kind == v1alpha1.TerraformKind {
			return true
		}
	}
	l := pod.Labels
	return l[nameLabel] == runnerPodName && l[v1alpha1.ManagedByLabel] == v1alpha1.ManagedByValue &&
		l[v1alpha1.OwnerNameLabel] == names.Label(obj.Name)
}

// isRunnerHost reports a hostname that a runner Pod of obj has.
func isRunnerHost(host string, obj *v1alpha1.Terraform) bool {
	return names.IsRunnerPodName(host, obj.Name)
}

// runnerState decides whether the Landform runner h is gone.
func runnerState(ctx context.Context, s *session, obj *v1alpha1.Terraform, h *statelock.Holder) holder {
	if p := h.Process; p != nil {
		if gone, why := p.Gone(); gone {
			return holder{gone: true, why: "gone: " + why}
		}
		return holder{why: fmt.Sprintf("unknown: local runner process %d on %s may still run (Landform can only tell on that host)", p.PID, p.Host)}
	}
	gone, how, pod, err := h.Pod.Look(ctx, func(ctx context.Context, key types.NamespacedName, pod *corev1.Pod) error {
		return s.c.Get(ctx, key, pod)
	}, obj.Namespace)
	switch {
	case errors.Is(err, statelock.ErrOutsideNamespace):
		return holder{why: fmt.Sprintf("unknown: the lock names Pod %s/%s, outside %s, so not a runner of %s/%s; Landform cannot tell whether it still runs", h.Pod.Namespace, h.Pod.Name, obj.Namespace, obj.Namespace, obj.Name)}
	case err != nil:
		return holder{why: fmt.Sprintf("unknown: Pod %s could not be read (%v)", h.Pod.Name, s.explain(err, "get", resPods, "Pod", h.Pod.Namespace, h.Pod.Name))}
	case gone:
		return holder{gone: true, why: fmt.Sprintf("gone: runner Pod %s %s", h.Pod.Name, how)}
	}
	return holder{why: fmt.Sprintf("alive: runner Pod %s is %s", h.Pod.Name, orDash(string(pod.Status.Phase)))}
}
