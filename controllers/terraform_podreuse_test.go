package controllers

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/placement"
)

// podReuseTime is how long reusingPodPlacer keeps a recycled runner Pod.
const podReuseTime = 10 * time.Second

// reusingPodPlacer is runningPodPlacer with --runner-pod-reuse=reuse.
func reusingPodPlacer(p *placement.Pod, reuse time.Duration) *placement.Pod {
	r := runningPodPlacer(p)
	r.ReuseFor(reuse)
	return r
}

// keptPods is the suite's placer whose runner Pods are kept for an hour,
// whose kept Pods only EndKept ends within a test.
var keptPods *placement.Pod

func keepingPlacer(p *placement.Pod) *placement.Pod {
	keptPods = reusingPodPlacer(p, time.Hour)
	return keptPods
}

// leftoverMarker names the process each object's module leaves running.
const leftoverMarker = "sleep 3717"

// leavingModule's apply fails if anything an earlier object's runs left in
// its runner Pod is still there (a file in HOME, in the runner's work
// directory or in the Pod's /tmp, named by $SCRATCH; a process), then leaves the
// same for the next: a file in each place and a process that outlives
// terraform.
var leavingModule = map[string]string{"modules/leave/main.tf": `
resource "terraform_data" "leave" {
  provisioner "local-exec" {
    command = <<-EOT
      set -e
      for f in "$HOME/left-behind" "$SCRATCH/left-behind" "${path.module}/../../../left-behind"; do
        if [ -e "$f" ]; then echo "found $f, left by the object before"; exit 1; fi
      done
      for p in /proc/[0-9]*; do
        if [ "$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null)" = "` + leftoverMarker + ` " ]; then echo "found process $p, left by the object before"; exit 1; fi
      done
      for f in "$HOME/left-behind" "$SCRATCH/left-behind" "${path.module}/../../../left-behind"; do echo here > "$f"; done
      nohup ` + leftoverMarker + ` >/dev/null 2>&1 &
    EOT
  }
}
`}

// leaving makes an object run leavingModule on the placer of label
// (podPlacementLabel), with $SCRATCH naming the Pod's /tmp and extraEnv.
func leaving(label string, extraEnv ...corev1.EnvVar) func(*infrav1.Terraform) {
	return func(tf *infrav1.Terraform) {
		tf.Labels = map[string]string{podPlacementLabel: label}
		tf.Spec.Path = "modules/leave"
		tf.Spec.RunnerPodTemplate = &infrav1.RunnerPodTemplate{Spec: infrav1.RunnerPodSpec{
			Env: append([]corev1.EnvVar{{Name: "SCRATCH", Value: "/tmp"}}, extraEnv...),
		}}
	}
}

// With --runner-pod-reuse, the runner Pod of one object's runs serves the
// next object of its namespace whose Pod would be the same, and nothing
// the first left reaches the second: each object's module checks that no
// file and no process of the object before is there, and leaves its own.
// One Pod serves both (the kubelet created one), labelled and owned by the
// object it serves; an object whose template differs gets a Pod of its
// own. Once the reuse time passes with no run, the Pods end, and with them
// every process the modules left.
func TestRunnerPodReusedForTheNextObject(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	kubelet := startKubelet(t, ns)
	newGitRepository(t, ns, "repo", artifacts.publish(leavingModule))
	recycled := recycledRunners()
	first := newTerraform(t, ns, "first", leaving("reuse"))
	waitReady(t, first)
	g.Expect(kubelet.CreatedIn(ns)).To(HaveLen(1))
	// The runner is recycled once its run is collected, which may come
	// a moment after Ready: an object created meanwhile gets a Pod of its
	// own.
	g.Eventually(recycledRunners).WithTimeout(waitTimeout).Should(BeNumerically(">", recycled))

	second := newTerraform(t, ns, "second", leaving("reuse"))
	waitReady(t, second)
	g.Expect(kubelet.CreatedIn(ns)).To(HaveLen(1), "the second object's runs ran in the first's Pod")
	pod := &corev1.Pod{}
	g.Expect(k8sClient.Get(context.Background(), keyOf(ns, kubelet.CreatedIn(ns)[0]), pod)).To(Succeed())
	g.Expect(pod.Labels).To(HaveKeyWithValue(infrav1.OwnerNameLabel, "second"), "the Pod is labelled for the object it serves")
	g.Expect(pod.OwnerReferences).To(ConsistOf(HaveField("Name", "second")), "and owned by it")

	other := newTerraform(t, ns, "other", leaving("reuse", corev1.EnvVar{Name: "OTHER", Value: "1"}))
	waitReady(t, other)
	g.Expect(kubelet.CreatedIn(ns)).To(HaveLen(2), "an object whose Pod differs gets its own")

	// Unused for the reuse time, the Pods end, and what ran in them.
	g.Eventually(func(g Gomega) { g.Expect(runnerPods(g, ns)).To(BeEmpty()) }).WithTimeout(podReuseTime + waitTimeout).Should(Succeed())
	g.Eventually(leftoverProcesses).WithTimeout(waitTimeout).Should(BeEmpty())
}

// recycledRunners is how many times the suite's runners said they were
// recycled (only this file's tests reuse runner Pods, one at a time).
func recycledRunners() int {
	return strings.Count(runnerLogs.String(), "recycled for another object")
}

// leftoverProcesses are the host's processes the modules of
// TestRunnerPodReusedForTheNextObject left.
func leftoverProcesses() []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.ReplaceAll(string(b), "\x00", " ") == leftoverMarker+" " {
			found = append(found, e.Name())
		}
	}
	return found
}

// A stopping controller ends the runner Pods it keeps (EndKept, which the
// manager calls on its way out) rather than leave them to exit after the
// reuse time and stay Completed: once it returns, the kept Pod is being
// deleted and no Pod is kept.
func TestKeptRunnerPodsEndWithTheController(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	kubelet := startKubelet(t, ns)
	newGitRepository(t, ns, "repo", artifacts.publish(leavingModule))
	recycled := recycledRunners()
	tf := newTerraform(t, ns, "kept", leaving("keep"))
	waitReady(t, tf)
	g.Eventually(recycledRunners).WithTimeout(waitTimeout).Should(Equal(recycled + 1))
	g.Expect(runnerPods(g, ns)).To(HaveLen(1), "the Pod is kept")

	keptPods.EndKept(logr.Discard())
	g.Expect(runnerPods(g, ns)).To(BeEmpty(), "the kept Pod is being deleted")
	g.Expect(kubelet.CreatedIn(ns)).To(HaveLen(1))
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(k8sClient.List(context.Background(), pods, client.InNamespace(ns))).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty())
	}).WithTimeout(waitTimeout).Should(Succeed())
}
