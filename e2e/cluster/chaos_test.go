package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/gitops"
	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/testenv"
)

// containerdSocket is the cluster's containerd (e2e/cluster/lib.sh).
const containerdSocket = "/run/landform-cluster/containerd/containerd.sock"

// chaosModule creates, once var.with_sg is true, a security group in the
// stand-in cloud after a step that takes var.sleep seconds: a run
// interrupted during that step has not created it, so the run that
// follows must create it exactly once.
const chaosModule = `
terraform {
  required_providers {
    landform = {
      source  = "landform-dev/landform"
      version = "~> 0.1"
    }
  }
}

variable "name" { type = string }
variable "with_sg" {
  type    = bool
  default = false
}
variable "sleep" {
  type    = number
  default = 0
}

resource "terraform_data" "slow" {
  triggers_replace = var.with_sg
  provisioner "local-exec" {
    command = "sleep ${var.with_sg ? var.sleep : 0}"
  }
}

resource "landform_security_group" "sg" {
  count       = var.with_sg ? 1 : 0
  name        = var.name
  description = "created once, whatever happens to the run"
  depends_on  = [terraform_data.slow]
}

output "security_group_id" {
  value = var.with_sg ? landform_security_group.sg[0].id : ""
}
`

// chaosObject is an auto-approved object of chaosModule, converged
// without the security group.
func (e *env) chaosObject(t *testing.T, p *platform, name string) *infrav1.Terraform {
	t.Helper()
	e.deleteLeftovers(t, name, "tfstate-default-"+name, name+"-outputs")
	p.deleteSecurityGroupsNamed(t, name)
	e.gitRepository(t, name, map[string]string{"chaos/main.tf": chaosModule})
	spec := autoSpec(name, "./chaos", 5*time.Second)
	// with_sg replaces terraform_data.slow: applied without a person, as
	// the scenarios need.
	spec.AutoApproveDestructive = true
	spec.Vars = []infrav1.Variable{
		{Name: "name", Value: testenv.JSONValue(name)},
		{Name: "sleep", Value: testenv.JSONValue(30)},
	}
	spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{Name: name + "-outputs"}
	spec.RunnerPodTemplate = &infrav1.RunnerPodTemplate{Spec: infrav1.RunnerPodSpec{
		Env: []corev1.EnvVar{{Name: "LANDFORM_CLOUD_ENDPOINT", Value: p.cloud.URL}},
	}}
	tf := e.terraform(t, &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
	e.waitForTerraform(t, tf, "Ready without the security group", readyTrue)
	return tf
}

// startSlowApply turns the security group on and returns once the apply
// runs (the runner holds the state lock) and is inside its slow step, with
// the runner Pod that holds the lock.
func (e *env) startSlowApply(t *testing.T, tf *infrav1.Terraform) (corev1.Pod, statelock.LockInfo) {
	t.Helper()
	ctx := context.Background()
	patch := `{"spec":{"vars":[{"name":"name","value":"` + tf.Name + `"},{"name":"sleep","value":30},{"name":"with_sg","value":true}]}}`
	if err := e.client.Patch(ctx, tf, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
	e.waitForTerraform(t, tf, "applying", func(tf *infrav1.Terraform) bool {
		return tf.Status.Run != nil && tf.Status.Run.Action == "apply"
	})
	var lock *statelock.LockInfo
	if err := e.poll(ctx, "the apply's runner to hold the state lock", func() (bool, string, error) {
		l, err := statelock.Read(ctx, e.kube.CoordinationV1().Leases(e.ns), statelock.LeaseName("tfstate-default-"+tf.Name))
		lock = l
		return l != nil, "not locked", err
	}); err != nil {
		t.Fatal(err)
	}
	holder, ok := statelock.ParseHolder(*lock)
	if !ok || holder.Pod == nil {
		t.Fatalf("the lock %+v is not held by a runner Pod", lock)
	}
	var pod corev1.Pod
	if err := e.client.Get(ctx, client.ObjectKey{Namespace: holder.Pod.Namespace, Name: holder.Pod.Name}, &pod); err != nil {
		t.Fatalf("the lock holder's Pod: %v", err)
	}
	// Inside the 30 s step: the security group is not created yet.
	time.Sleep(5 * time.Second)
	return pod, *lock
}

// securityGroupsNamed counts the cloud's security groups called name.
func (p *platform) securityGroupsNamed(t *testing.T, name string) int {
	t.Helper()
	sgs, err := p.cloud.ListSecurityGroups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, sg := range sgs {
		if sg.Name == name {
			n++
		}
	}
	return n
}

// deleteSecurityGroupsNamed deletes what an interrupted earlier run of the
// test left in the cloud.
func (p *platform) deleteSecurityGroupsNamed(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	sgs, err := p.cloud.ListSecurityGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sg := range sgs {
		if sg.Name == name {
			if err := p.cloud.DeleteSecurityGroup(ctx, sg.ID); err != nil {
				t.Fatalf("deleting the leftover security group %s: %v", sg.ID, err)
			}
		}
	}
}

// eventsOf returns the messages of this object's events with reason.
func (e *env) eventsOf(t *testing.T, tf *infrav1.Terraform, reason string) []string {
	t.Helper()
	var events corev1.EventList
	if err := e.client.List(context.Background(), &events, client.InNamespace(tf.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range events.Items {
		// By UID: events of an earlier object of the same name linger.
		if ev.InvolvedObject.Kind == infrav1.TerraformKind && ev.InvolvedObject.UID == tf.UID && ev.Reason == reason {
			out = append(out, ev.Message)
		}
	}
	return out
}

// A runner killed in the middle of an apply, in the two ways a real node
// does it. Deleted with grace period 0, the Pod's container still gets
// SIGTERM and the kubelet's minimum grace: the runner interrupts terraform,
// which saves the state and releases its lock, and the run is reported
// failed (interrupted) — or lost, if the runner did not manage in time.
// SIGKILLed (every process of the container, as the OOM killer or a
// crashed node does), nothing is released by the runner: the controller
// sees the Pod fail, reports the run lost, releases exactly the lock that
// runner took, and plans again from the state. Either way the object
// converges, the lock is free and the security group the interrupted run
// had not reached yet is created once.
func TestChaosRunnerKilledMidApply(t *testing.T) {
	e := connect(t)
	p := e.platform
	for _, tc := range []struct {
		name string
		kill func(t *testing.T, pod *corev1.Pod)
	}{
		{name: "chaos-grace0", kill: func(t *testing.T, pod *corev1.Pod) {
			zero := int64(0)
			if err := e.client.Delete(context.Background(), pod, &client.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
				t.Fatalf("deleting the runner Pod: %v", err)
			}
		}},
		{name: "chaos-sigkill", kill: func(t *testing.T, pod *corev1.Pod) {
			if len(pod.Status.ContainerStatuses) != 1 {
				t.Fatalf("runner Pod %s has %d container statuses", pod.Name, len(pod.Status.ContainerStatuses))
			}
			id := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
			out, err := exec.Command("ctr", "--address", containerdSocket, "-n", "k8s.io", "tasks", "kill", "--all", "--signal", "SIGKILL", id).CombinedOutput()
			if err != nil {
				t.Fatalf("SIGKILL to the runner's container %s: %v: %s", id, err, out)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			tf := e.chaosObject(t, p, tc.name)
			pod, lock := e.startSlowApply(t, tf)
			tc.kill(t, &pod)
			t.Logf("killed runner Pod %s mid-apply", pod.Name)
			cur := e.waitForTerraform(t, tf, "converged after the kill", func(tf *infrav1.Terraform) bool {
				return readyTrue(tf) && tf.Status.Run == nil
			})
			if n := p.securityGroupsNamed(t, tc.name); n != 1 {
				t.Errorf("the cloud holds %d security groups named %s, want exactly 1", n, tc.name)
			}
			if l, err := statelock.Read(ctx, e.kube.CoordinationV1().Leases(e.ns), statelock.LeaseName("tfstate-default-"+tc.name)); err != nil || l != nil {
				t.Errorf("the state lock after convergence: %+v, %v; want none", l, err)
			}
			lost := e.eventsOf(t, cur, infrav1.RunLostReason)
			released := strings.Join(e.eventsOf(t, cur, infrav1.StateLockReleasedReason), "\n")
			interrupted := strings.Join(e.eventsOf(t, cur, infrav1.ApplyFailedReason), "\n")
			switch {
			case len(lost) > 0:
				t.Logf("the run was reported lost: %q", lost)
				if !strings.Contains(released, lock.ID) {
					t.Errorf("%s events %q do not name the killed runner's lock %s", infrav1.StateLockReleasedReason, released, lock.ID)
				}
			case tc.name == "chaos-sigkill":
				t.Errorf("a SIGKILLed runner's run was not reported lost (%s); ApplyFailed events: %q", infrav1.RunLostReason, interrupted)
			case !strings.Contains(interrupted, "interrupted"):
				t.Errorf("the killed run was reported neither lost nor interrupted; ApplyFailed events: %q", interrupted)
			default:
				t.Logf("the runner interrupted terraform in its grace: %s", interrupted)
			}
		})
	}
}

// The controller's Pod deleted (grace 0) in the middle of an apply: the
// apply finishes in its runner Pod, the controller's next Pod attaches to
// it and collects the result; no other runner Pod applies, no run is lost,
// and the security group is created once.
func TestChaosControllerPodKilledMidApply(t *testing.T) {
	e := connect(t)
	p := e.platform
	ctx := context.Background()
	const name = "chaos-controller"
	tf := e.chaosObject(t, p, name)
	seen := e.watchRunnerPods(t, name)
	pod, _ := e.startSlowApply(t, tf)

	var controllers corev1.PodList
	if err := e.client.List(ctx, &controllers, client.InNamespace(e.controllerNS), client.MatchingLabels{"app.kubernetes.io/name": "landform"}); err != nil {
		t.Fatal(err)
	}
	if len(controllers.Items) != 1 {
		t.Fatalf("want the one controller Pod, found %d", len(controllers.Items))
	}
	zero := int64(0)
	if err := e.client.Delete(ctx, &controllers.Items[0], &client.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted controller Pod %s with grace 0 while runner Pod %s applies", controllers.Items[0].Name, pod.Name)
	cur := e.waitForTerraform(t, tf, "converged by the next controller Pod", func(tf *infrav1.Terraform) bool {
		return readyTrue(tf) && tf.Status.Run == nil
	})
	if n := p.securityGroupsNamed(t, name); n != 1 {
		t.Errorf("the cloud holds %d security groups named %s, want exactly 1", n, name)
	}
	if got := e.eventsOf(t, cur, infrav1.RunLostReason); len(got) != 0 {
		t.Errorf("runs reported lost: %q; the apply should have been collected", got)
	}
	var applied []string
	for _, p := range seen.pods() {
		if p.CreationTimestamp.After(pod.CreationTimestamp.Time) {
			applied = append(applied, p.Name)
		}
	}
	if len(applied) != 0 {
		t.Errorf("runner Pods started after the apply's Pod %s: %v; the apply should have been collected, not run again", pod.Name, applied)
	}
	var out corev1.Secret
	if err := e.client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name + "-outputs"}, &out); err != nil || !strings.HasPrefix(string(out.Data["security_group_id"]), "sg-") {
		t.Errorf("the outputs Secret after collection: %v, security_group_id %q", err, out.Data["security_group_id"])
	}
	e.waitControllerAvailable(t)
}

// waitControllerAvailable waits until the controller Deployment is
// available again, so that the next test has a controller.
func (e *env) waitControllerAvailable(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if err := e.poll(ctx, "a controller Pod to be ready", func() (bool, string, error) {
		var pods corev1.PodList
		if err := e.client.List(ctx, &pods, client.InNamespace(e.controllerNS), client.MatchingLabels{"app.kubernetes.io/name": "landform"}); err != nil {
			return false, "", err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && gitops.PodReady(&p) {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d Pods, none ready", len(pods.Items)), nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A runner image the node cannot pull: the object says so at once
// (RunnerFailed, naming the image and the kubelet's reason) instead of
// hanging, and recovers when the image is fixed.
func TestChaosRunnerImageCannotBePulled(t *testing.T) {
	e := connect(t)
	ctx := context.Background()
	const name = "chaos-image"
	const image = "localhost/landform-runner:does-not-exist"
	e.deleteLeftovers(t, name, "tfstate-default-"+name)
	e.gitRepository(t, name, map[string]string{"m/main.tf": `resource "terraform_data" "x" { input = "y" }`})
	spec := autoSpec(name, "./m", 10*time.Second)
	spec.RunnerPodTemplate = &infrav1.RunnerPodTemplate{Spec: infrav1.RunnerPodSpec{Image: image}}
	tf := e.terraform(t, &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
	started := time.Now()
	cur := e.waitForTerraform(t, tf, "RunnerFailed naming the image", func(tf *infrav1.Terraform) bool {
		c := ready(tf)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == infrav1.RunnerFailedReason
	})
	msg := ready(cur).Message
	t.Logf("after %s: %s", time.Since(started).Round(time.Second), msg)
	for _, want := range []string{image, "cannot be pulled", "spec.runnerPodTemplate.spec.image"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the Ready message %q does not contain %q", msg, want)
		}
	}
	if cur.Status.Run != nil {
		t.Errorf("a run is still recorded: %+v", cur.Status.Run)
	}
	patch := `{"spec":{"runnerPodTemplate":null}}`
	if err := e.client.Patch(ctx, tf, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
	e.waitForTerraform(t, tf, "Ready once the image is fixed", readyTrue)
}
