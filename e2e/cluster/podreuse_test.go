package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// leavingModule's apply fails if anything an earlier object's runs left in
// its runner Pod is still there, then leaves the same for the next: a file
// in the engine's HOME, in the runner's /work, in the Pod's /tmp and
// /dev/shm, and a process that outlives terraform.
const leavingModule = `
resource "terraform_data" "leave" {
  provisioner "local-exec" {
    command = <<-EOT
      set -e
      for f in "$HOME/left-behind" /tmp/left-behind /dev/shm/left-behind "${path.module}/../../left-behind"; do
        if [ -e "$f" ]; then echo "found $f, left by the object before"; exit 1; fi
      done
      for p in /proc/[0-9]*; do
        if [ "$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null)" = "sleep 3717 " ]; then echo "found process $p, left by the object before"; exit 1; fi
      done
      for f in "$HOME/left-behind" /tmp/left-behind /dev/shm/left-behind "${path.module}/../../left-behind"; do echo here > "$f"; done
      nohup sleep 3717 >/dev/null 2>&1 &
    EOT
  }
}
`

// TestRunnerPodReusedOnARealKubelet: with --runner-pod-reuse, the runner
// Pod of one object's runs, a container of containerd and runc, serves
// the next object's, and nothing the first object's module left in it
// (a process, files in HOME, /work, /tmp and /dev/shm) reaches the second's, whose
// module fails if it finds any. It runs where the installation keeps
// runner Pods for reuse, as the chart's default does. Its objects' Pods
// carry a label of their own, so that no Pod another test's object left
// kept serves them.
func TestRunnerPodReusedOnARealKubelet(t *testing.T) {
	e := connect(t)
	ctx := context.Background()
	if reuse := e.controllerFlag(t, "runner-pod-reuse"); reuse != "" {
		if d, err := time.ParseDuration(reuse); err == nil && d <= 0 {
			t.Skip("the installation keeps no runner Pod for reuse (--runner-pod-reuse=" + reuse + ")")
		}
	}
	for _, name := range []string{"reuse-first", "reuse-second"} {
		e.deleteLeftovers(t, name, "tfstate-default-"+name)
	}
	e.gitRepository(t, "reuse", map[string]string{"leave/main.tf": leavingModule})
	object := func(name string) *infrav1.Terraform {
		spec := autoSpec("reuse", "./leave", time.Minute)
		spec.RunnerPodTemplate = &infrav1.RunnerPodTemplate{Metadata: infrav1.RunnerPodMetadata{Labels: map[string]string{"e2e.landform.dev/test": "pod-reuse"}}}
		return e.terraform(t, &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
	}
	readyOrFailed := func(tf *infrav1.Terraform) bool {
		c := ready(tf)
		return c != nil && (c.Status == metav1.ConditionTrue || c.Reason == infrav1.ApplyFailedReason)
	}

	first := object("reuse-first")
	cur := e.waitForTerraform(t, first, "Ready", readyOrFailed)
	if !readyTrue(cur) {
		t.Fatalf("the first object: %s", readyMessage(cur))
	}
	pod := e.onlyRunnerPod(t, "reuse-first")
	// Its runner is recycled once its run is collected, a moment after
	// Ready: an object created before gets a Pod of its own.
	if err := e.poll(ctx, "the runner Pod recycled", func() (bool, string, error) {
		logs, err := e.kube.CoreV1().Pods(e.ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		return err == nil && strings.Contains(string(logs), "recycled for another object"), fmt.Sprint(err), nil
	}); err != nil {
		t.Fatal(err)
	}

	second := object("reuse-second")
	cur = e.waitForTerraform(t, second, "Ready", readyOrFailed)
	if !readyTrue(cur) {
		t.Fatalf("the second object, in the first's Pod: %s", readyMessage(cur))
	}
	reused := e.onlyRunnerPod(t, "reuse-second")
	if reused.UID != pod.UID {
		t.Fatalf("the second object's runs ran in Pod %s, not in the first's (%s)", reused.Name, pod.Name)
	}
	if ref := metav1.GetControllerOf(&reused); ref == nil || ref.Name != "reuse-second" {
		t.Errorf("the reused Pod is owned by %v, want reuse-second", ref)
	}
}

// onlyRunnerPod is the one live runner Pod labelled as object name's.
func (e *env) onlyRunnerPod(t *testing.T, name string) corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := e.client.List(context.Background(), &pods, client.InNamespace(e.ns), client.MatchingLabels{infrav1.OwnerNameLabel: name}); err != nil {
		t.Fatal(err)
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			live = append(live, p)
		}
	}
	if len(live) != 1 {
		t.Fatalf("%d running runner Pods of %s, want 1", len(live), name)
	}
	return live[0]
}

// controllerFlag is the value of the installed controller's --name, ""
// without one.
func (e *env) controllerFlag(t *testing.T, name string) string {
	t.Helper()
	var dep appsv1.Deployment
	if err := e.client.Get(context.Background(), keyOf(e.controllerNS, "landform-controller"), &dep); err != nil {
		t.Fatalf("the controller's Deployment: %v", err)
	}
	for _, c := range dep.Spec.Template.Spec.Containers {
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
				return v
			}
		}
	}
	return ""
}

// readyMessage is the Ready condition's reason and message.
func readyMessage(tf *infrav1.Terraform) string {
	c := apimeta.FindStatusCondition(tf.Status.Conditions, meta.ReadyCondition)
	if c == nil {
		return "no Ready condition"
	}
	return c.Reason + ": " + c.Message
}
