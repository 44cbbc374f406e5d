package durable

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/fakekubelet"
	"github.com/landform-dev/landform/internal/testenv"
)

// startKubelet plays the kubelet for runner Pods in this test process: the
// runners are its children, not the controller's, as in a cluster.
func startKubelet(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "path")
	g := NewWithT(t)
	g.Expect(os.MkdirAll(path, 0o755)).To(Succeed())
	g.Expect(os.Symlink(bins.tofu, filepath.Join(path, "tofu"))).To(Succeed())
	logs := &testenv.SyncBuffer{}
	k := fakekubelet.New(env.Client, bins.runner, path+string(os.PathListSeparator)+os.Getenv("PATH"), filepath.Join(dir, "kubelet"), map[string]string{}, logs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); k.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("kubelet and runner output:\n%s", logs.String())
		}
	})
}

// SIGKILL to the controller mid-apply with runner Pods: the Pod carries on,
// a new controller process finds the run recorded in status, attaches to
// its Pod and collects the result. The create ran once, the outputs are
// written, and the runner Pod is removed.
func TestControllerSIGKILLPodApplyIsCollected(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	publish(t, ns, map[string]string{"main.tf": slowModule})
	controllerNS := "landform-system"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controllerNS}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	g.Expect(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "landform-runner"}})).To(Succeed())
	startKubelet(t)

	podArgs := []string{"--runner=pod", "--runner-image=landform-runner:test", "--namespace=" + controllerNS, "--runner-start-timeout=1m"}
	work := t.TempDir()
	c := startController(t, work, podArgs...)
	effects := filepath.Join(t.TempDir(), "effects")
	// The runner Pod reaches no API server here: the state is in a local
	// backend on this machine, which the Pod shares.
	state := filepath.Join(t.TempDir(), "terraform.tfstate")
	tf := newSlowTerraform(t, ns, "podkill", effects, 15, func(tf *infrav1.Terraform) {
		tf.Spec.BackendConfig = &infrav1.BackendConfig{CustomConfiguration: fmt.Sprintf("terraform {\n  backend \"local\" {\n    path = %q\n  }\n}\n", state)}
	})

	g.Eventually(func() int { return creates(effects) }, 2*time.Minute, 100*time.Millisecond).Should(Equal(1), "the create has begun")
	run := get(g, tf).Status.Run
	g.Expect(run).NotTo(BeNil())
	g.Expect(run.Action).To(Equal("apply"))
	c.signal(t, syscall.SIGKILL)
	_ = c.waitExit(t, time.Minute)
	g.Expect(runnerPods(g, ns)).To(HaveLen(1), "the runner Pod carries on without the controller")

	startController(t, work, podArgs...)
	g.Eventually(func(g Gomega) {
		obj := get(g, tf)
		g.Expect(obj.Status.Run).To(BeNil())
		g.Expect(obj.Status.LastAppliedPlan).To(Equal(run.Plan), "the recorded run's plan was applied")
		g.Expect(string(secretData(g, ns, tf.Name+"-outputs")["effects"])).To(Equal(effects))
	}, 3*time.Minute, 250*time.Millisecond).Should(Succeed())
	g.Expect(creates(effects)).To(Equal(1), "the create ran once")
	g.Eventually(func(g Gomega) { g.Expect(runnerPods(g, ns)).To(BeEmpty()) }, time.Minute, 250*time.Millisecond).Should(Succeed(), "the runner Pod is removed")
}

func runnerPods(g Gomega, ns string) []string {
	var pods corev1.PodList
	g.Expect(env.Client.List(context.Background(), &pods, client.InNamespace(ns))).To(Succeed())
	var names []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			names = append(names, p.Name)
		}
	}
	return names
}
