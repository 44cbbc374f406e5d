package cluster

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// probeModule looks at the runner from inside, as a module can: its
// local-exec provisioner tries to write to / and records the result, the
// uid and the effective capabilities in $HOME (the runner's /tmp emptyDir);
// the outputs read them back after the apply. The file names carry the
// resource's id, unknown at plan time, so that file() is only called
// during the apply, after the provisioner ran.
const probeModule = `
resource "terraform_data" "probe" {
  provisioner "local-exec" {
    command = <<-EOT
      set -e
      f="$HOME/probe-${self.id}"
      if touch /landform-root-write-probe 2>/dev/null; then echo writable > "$f.root"; else echo readonly > "$f.root"; fi
      id -u > "$f.uid"
      awk '/^CapEff:/ {print $2}' /proc/self/status > "$f.caps"
      echo "$HOME" > "$f.home"
    EOT
  }
}

locals {
  probe = "${pathexpand("~")}/probe-${terraform_data.probe.id}"
}

# A later run (the destroy) is another Pod without these files: "" then.
output "root_filesystem" {
  value = fileexists("${local.probe}.root") ? trimspace(file("${local.probe}.root")) : ""
}

output "uid" {
  value = fileexists("${local.probe}.uid") ? trimspace(file("${local.probe}.uid")) : ""
}

output "capabilities" {
  value = fileexists("${local.probe}.caps") ? trimspace(file("${local.probe}.caps")) : ""
}

output "home" {
  value = fileexists("${local.probe}.home") ? trimspace(file("${local.probe}.home")) : ""
}
`

// runnerPodsSeen records the runner Pods of one object while a test runs:
// they are deleted after their run, so they are looked at while they live.
type runnerPodsSeen struct {
	mu      sync.Mutex
	running map[string]corev1.Pod // by name: the Pod as seen while Running
}

func (e *env) watchRunnerPods(t *testing.T, owner string) *runnerPodsSeen {
	t.Helper()
	seen := &runnerPodsSeen{running: map[string]corev1.Pod{}}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := e.client.Watch(ctx, &corev1.PodList{}, client.InNamespace(e.ns), client.MatchingLabels{"app.kubernetes.io/name": "landform-runner"})
	if err != nil {
		cancel()
		t.Fatalf("watching runner Pods: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if ref := metav1.GetControllerOf(p); ref == nil || ref.Name != owner || p.Status.Phase != corev1.PodRunning {
				continue
			}
			seen.mu.Lock()
			seen.running[p.Name] = *p
			seen.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.Stop(); cancel(); <-done })
	return seen
}

func (s *runnerPodsSeen) pods() []corev1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]corev1.Pod, 0, len(s.running))
	for _, p := range s.running {
		out = append(out, p)
	}
	return out
}

// TestRunnerPodsOnARealKubelet: a Terraform object plans and applies in
// runner Pods that a real kubelet started under containerd and runc. From
// inside the run, the root filesystem is read-only, the user is 65532 and
// no capability is left; the controller dialled the runner on its Pod
// address; the runner reached its state with the object's state identity
// under the real authorizer, while its own ServiceAccount may do nothing;
// the outputs Secret holds what the module saw; deletion destroys.
func TestRunnerPodsOnARealKubelet(t *testing.T) {
	e := connect(t)
	ctx := context.Background()
	const name = "runner-pods"
	stateName := "tfstate-default-" + name
	// The state of an interrupted earlier run would make this one a no-op.
	e.deleteLeftovers(t, name, stateName, name+"-outputs")
	e.gitRepository(t, name, map[string]string{"probe/main.tf": probeModule})
	seen := e.watchRunnerPods(t, name)
	spec := autoSpec(name, "./probe", 5*time.Second)
	spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{Name: name + "-outputs"}
	tf := e.terraform(t, &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})

	cur := e.waitForTerraform(t, tf, "Ready", readyTrue)
	if cur.Status.LastAppliedRevision == "" || cur.Status.LastAppliedPlan == "" {
		t.Errorf("Ready without an applied plan: revision %q plan %q", cur.Status.LastAppliedRevision, cur.Status.LastAppliedPlan)
	}

	// What the module saw from inside its runner Pod.
	var out corev1.Secret
	if err := e.client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name + "-outputs"}, &out); err != nil {
		t.Fatalf("outputs Secret: %v", err)
	}
	for key, want := range map[string]string{
		"root_filesystem": "readonly",         // readOnlyRootFilesystem, enforced by runc
		"uid":             "65532",            // runAsUser
		"capabilities":    "0000000000000000", // drop ALL, no privilege escalation
	} {
		if got := string(out.Data[key]); got != want {
			t.Errorf("output %s = %q, want %q", key, got, want)
		}
	}
	t.Logf("the module saw: root filesystem %s, uid %s, CapEff %s, HOME %s",
		out.Data["root_filesystem"], out.Data["uid"], out.Data["capabilities"], out.Data["home"])
	// The engine's HOME, where the probe wrote, is the runner's workspace
	// (an emptyDir), not the read-only image.
	if home := string(out.Data["home"]); !strings.HasPrefix(home, "/work/") {
		t.Errorf("output home = %q, want a directory of the runner's /work emptyDir", home)
	}
	if len(out.Data) != 4 {
		t.Errorf("outputs Secret has keys %v, want exactly the module's four outputs", keys(out.Data))
	}

	// The runs happened in Pods of this node, on the Pod network.
	pods := seen.pods()
	if len(pods) == 0 {
		t.Fatal("no runner Pod of the object was seen Running")
	}
	podNet := netip.MustParsePrefix("10.244.0.0/24")
	for _, p := range pods {
		if p.Spec.NodeName != e.node.Name {
			t.Errorf("runner Pod %s ran on %q, want node %s", p.Name, p.Spec.NodeName, e.node.Name)
		}
		if ip, err := netip.ParseAddr(p.Status.PodIP); err != nil || !podNet.Contains(ip) {
			t.Errorf("runner Pod %s has address %q, want one of the Pod network %s", p.Name, p.Status.PodIP, podNet)
		}
		if p.Spec.ServiceAccountName != runnerSA {
			t.Errorf("runner Pod %s runs as ServiceAccount %q, want %s", p.Name, p.Spec.ServiceAccountName, runnerSA)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running == nil && cs.State.Terminated == nil {
				t.Errorf("runner Pod %s container %s: %+v", p.Name, cs.Name, cs.State)
			}
		}
	}
	t.Logf("runner Pods seen running: %d (e.g. %s at %s)", len(pods), pods[0].Name, pods[0].Status.PodIP)

	// State: in the object's namespace, reached with its state identity.
	var state corev1.Secret
	if err := e.client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: stateName}, &state); err != nil {
		t.Fatalf("state Secret %s: %v", stateName, err)
	}
	if len(state.Data) == 0 {
		t.Errorf("state Secret %s is empty after an apply", stateName)
	}

	// What the real authorizer lets each identity do: the runner Pod's
	// ServiceAccount nothing; the state identity its own state and no more.
	stateSA := "landform-state-" + name
	for _, c := range []struct {
		sa, verb, group, resource, name string
		want                            bool
	}{
		{runnerSA, "get", "", "secrets", stateName, false},
		{runnerSA, "list", "", "secrets", "", false},
		{runnerSA, "create", "", "secrets", "", false},
		{runnerSA, "update", "coordination.k8s.io", "leases", "lock-" + stateName, false},
		{runnerSA, "get", "infra.landform.dev", "terraforms", name, false},
		{stateSA, "get", "", "secrets", stateName, true},
		{stateSA, "update", "", "secrets", stateName, true},
		{stateSA, "update", "coordination.k8s.io", "leases", "lock-" + stateName, true},
		{stateSA, "get", "", "secrets", name + "-outputs", false},
		{stateSA, "list", "", "secrets", "", false},
		{stateSA, "create", "", "pods", "", false},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:" + e.ns + ":" + c.sa,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + e.ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: e.ns, Verb: c.verb, Group: c.group, Resource: c.resource, Name: c.name,
			},
		}}
		if err := e.client.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != c.want {
			t.Errorf("%s may %s %s.%s %q: %v, want %v", c.sa, c.verb, c.resource, c.group, c.name, sar.Status.Allowed, c.want)
		}
	}

	// Deletion destroys in a runner Pod and removes state and outputs.
	e.deleteAndWait(t, tf)
	for _, n := range []string{stateName, name + "-outputs"} {
		if err := e.client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: n}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("Secret %s after deletion: %v, want NotFound", n, err)
		}
	}
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
