package demo

import (
	"context"
	"fmt"
	"strings"

	"github.com/landform-dev/landform/internal/gitops"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// On a real node the app Kustomization does not wait for the
// infrastructure (no dependsOn; the outputs are substituted when they
// exist): the app's Pod itself waits for the outputs Secret, which is what
// a workload installed together with its infrastructure does.
func createNodeApp(ctx context.Context, w *walk) error {
	if err := w.createKustomization(ctx, "app", "./demo/app", map[string]any{
		"postBuild": map[string]any{"substituteFrom": []any{map[string]any{"kind": "Secret", "name": outputsSecret, "optional": true}}},
	}); err != nil {
		return err
	}
	w.say("Kustomization demo/app applies the app at once; its Pod mounts Secret %s", outputsSecret)
	var waiting *corev1.Pod
	var msg string
	err := w.poll(ctx, "the app's Pod waits for the Secret", func() (bool, error) {
		pod, err := w.appPod(ctx)
		if err != nil || pod == nil || gitops.WaitingReason(pod) != "ContainerCreating" {
			return false, err
		}
		waiting = pod
		msg, err = gitops.SecretMountFailure(ctx, w.opts.Env.Client, pod, outputsSecret)
		return msg != "", err
	})
	if err != nil {
		return err
	}
	w.say("Pod demo/%s waits: ContainerCreating (FailedMount: %s)", waiting.Name, msg)
	return nil
}

// appPod is the app's one Pod not being deleted, or nil.
func (w *walk) appPod(ctx context.Context) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := w.opts.Env.Client.List(ctx, &pods, client.InNamespace(Namespace), client.MatchingLabels{"app": "app"}); err != nil {
		return nil, err
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	if len(live) != 1 {
		return nil, nil
	}
	return &live[0], nil
}

// checkAppPod waits for the app's Pod to run and checks its log: the
// security group from the Secret, and a database connection made with the
// DSN's credentials.
func (w *walk) checkAppPod(ctx context.Context) error {
	kube, err := kubernetes.NewForConfig(w.opts.Env.Config)
	if err != nil {
		return err
	}
	var pod *corev1.Pod
	var log string
	err = w.poll(ctx, "the app's Pod runs with the security group and reaches its database", func() (bool, error) {
		var err error
		if pod, err = w.appPod(ctx); err != nil || pod == nil || !gitops.PodReady(pod) {
			return false, err
		}
		raw, err := kube.CoreV1().Pods(Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return false, nil // not started yet
		}
		log = string(raw)
		return strings.Contains(log, "security group: "+w.sgID) && strings.Contains(log, "database: connected"), nil
	})
	if err != nil {
		return fmt.Errorf("%w (the app's log: %q)", err, log)
	}
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		w.say("Pod demo/%s | %s", pod.Name, line)
	}
	return nil
}
