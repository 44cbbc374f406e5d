package durable

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/fakekubelet"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/testenv"
)

var (
	clusterOnce sync.Once
	clusterErr  error
)

// podCluster makes the test API server a cluster for runner Pods, once:
// the controller's namespace. It skips the test when runner Pods cannot get
// an in-cluster view on this machine.
func podCluster(t *testing.T) {
	t.Helper()
	suite.Require(t)
	clusterOnce.Do(func() {
		if err := fakekubelet.CheckInCluster(); err != nil {
			clusterErr = err
			return
		}
		ctx := context.Background()
		if err := suite.Env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controllerNS}}); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	})
	if clusterErr != nil {
		t.Skipf("runner Pods need an in-cluster view of the API server, which the fake kubelet cannot give here: %v", clusterErr)
	}
}

// runnerNamespace creates a namespace for runner Pods, with the runner
// ServiceAccount, as the chart does: it has no permission at all; runners
// reach their state with the state identity the controller gives them.
func runnerNamespace(t *testing.T) string {
	t.Helper()
	podCluster(t)
	ns := suite.Namespace(t)
	ctx := context.Background()
	g := NewWithT(t)
	g.Expect(suite.Env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "landform-runner"}})).To(Succeed())
	return ns
}

// startKubelet plays the kubelet for runner Pods in this test process: the
// runners are its children, not the controller's, as in a cluster, and
// they reach the API server in-cluster, with their ServiceAccount's token.
func startKubelet(t *testing.T) *fakekubelet.Kubelet {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "path")
	g := NewWithT(t)
	g.Expect(os.MkdirAll(path, 0o755)).To(Succeed())
	g.Expect(os.Symlink(suite.Tofu, filepath.Join(path, "tofu"))).To(Succeed())
	logs := &testenv.SyncBuffer{}
	var out = testenv.Prefixed(logs, "runner: ")
	if testenv.StreamLogs {
		out = testenv.Prefixed(os.Stderr, "runner: ")
	}
	k := fakekubelet.New(fakekubelet.Options{
		Client:       suite.Env.Client,
		RunnerBinary: suite.Runner,
		Path:         path + string(os.PathListSeparator) + os.Getenv("PATH"),
		Dir:          filepath.Join(dir, "kubelet"),
		Logs:         out,
		APIServer:    suite.Env.Config,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); k.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() && !testenv.StreamLogs {
			t.Logf("fake kubelet and runner output:\n%s", logs.String())
		}
	})
	return k
}

// SIGKILL to the controller mid-apply with runner Pods: the Pod carries on,
// a new controller process finds the run recorded in status, attaches to
// its Pod and collects the result. The create ran once, the outputs are
// written, the object is Ready with no lock left, and the runner Pod is
// removed.
func TestControllerSIGKILLPodApplyIsCollected(t *testing.T) {
	g := NewWithT(t)
	ns := runnerNamespace(t)
	suite.Publish(t, ns, map[string]string{"main.tf": slowModule})
	kubelet := startKubelet(t)
	work := t.TempDir()
	c := startController(t, pods, work)
	effects := filepath.Join(t.TempDir(), "effects")
	tf := newSlowTerraform(t, ns, "podkill", effects, 15)
	logOnFailure(t, tf)

	g.Eventually(func() int { return began(effects) }, 2*time.Minute, 100*time.Millisecond).Should(Equal(1), "the create has begun")
	run := get(g, tf).Status.Run
	g.Expect(run).NotTo(BeNil())
	g.Expect(run.Action).To(Equal("apply"))
	pod := liveRunnerPod(g, ns)
	lock := stateLock(g, tf)
	g.Expect(lock).NotTo(BeNil(), "the runner holds the state lock")
	holder, ok := statelock.ParseHolder(*lock)
	g.Expect(ok).To(BeTrue())
	g.Expect(holder.Pod).To(Equal(&statelock.PodHolder{Namespace: ns, Name: pod.Name, UID: string(pod.UID)}), "under its Pod's identity")
	pid := kubelet.RunnerPID(ns, pod.Name)
	g.Expect(pid).NotTo(BeZero())
	g.Expect(c.Kill()).To(Succeed())
	g.Expect(liveRunnerPod(g, ns).UID).To(Equal(pod.UID), "the runner Pod carries on without the controller")
	g.Expect(kubelet.RunnerExited(ns, pod.Name)).To(BeFalse(), "and so does its runner (pid %d)", pid)

	g.Expect(c.Restart()).To(Succeed())
	g.Eventually(func(g Gomega) {
		settled(g, tf, effects)
		g.Expect(get(g, tf).Status.LastAppliedPlan).To(Equal(run.Plan), "the recorded run's plan was applied")
	}, 3*time.Minute, 250*time.Millisecond).Should(Succeed())
	n, finished := creates(effects)
	g.Expect(n).To(Equal(1), "the create ran once")
	g.Expect(finished).To(Equal(1))
	g.Expect(events(g, tf, infrav1.RunLostReason)).To(BeEmpty(), "the run was collected, not lost")
	g.Eventually(func(g Gomega) { g.Expect(runnerPods(g, ns)).To(BeEmpty()) }, time.Minute, 250*time.Millisecond).Should(Succeed(), "the runner Pod is removed")
}

// The runner Pod killed mid-apply (the container SIGKILLed and the Pod
// Failed, as a node losing it): terraform could neither save its state nor
// release its lock. The controller reports the run lost, releases exactly
// the lock that runner left (a StateLockReleased event names it), plans
// again from the state and converges within retryInterval plus a minute;
// the state's serial only grew, on the same lineage.
func TestRunnerPodKilledMidApplyReleasesItsLock(t *testing.T) {
	g := NewWithT(t)
	ns := runnerNamespace(t)
	suite.Publish(t, ns, map[string]string{"main.tf": slowModule})
	kubelet := startKubelet(t)
	startController(t, pods, t.TempDir())
	effects := filepath.Join(t.TempDir(), "effects")
	tf := newSlowTerraform(t, ns, "podlost", effects, 0)
	logOnFailure(t, tf)
	g.Eventually(func(g Gomega) { settled(g, tf, effects) }, 2*time.Minute, 250*time.Millisecond).Should(Succeed())
	before := readState(g, tf)
	g.Expect(before.Serial).To(BeNumerically(">", 0))

	// A new revision of the variables replaces the resource; its create
	// takes 12 s.
	obj := get(g, tf)
	patch := client.MergeFrom(obj.DeepCopy())
	obj.Spec.Vars[1].Value = testenv.JSONValue(12)
	obj.Spec.Vars = append(obj.Spec.Vars, infrav1.Variable{Name: "rev", Value: testenv.JSONValue("2")})
	g.Expect(suite.Env.Client.Patch(context.Background(), obj, patch)).To(Succeed())
	g.Eventually(func() int { return began(effects) }, 2*time.Minute, 100*time.Millisecond).Should(Equal(2), "the new create has begun")
	time.Sleep(time.Second)
	pod := liveRunnerPod(g, ns)
	lock := stateLock(g, tf)
	g.Expect(lock).NotTo(BeNil(), "the runner holds the state lock")
	holder, ok := statelock.ParseHolder(*lock)
	g.Expect(ok).To(BeTrue())
	g.Expect(holder.Pod).To(Equal(&statelock.PodHolder{Namespace: ns, Name: pod.Name, UID: string(pod.UID)}))

	killed := time.Now()
	g.Expect(kubelet.Kill(ns, pod.Name)).To(Succeed())
	_, finished := creates(effects)
	g.Expect(finished).To(Equal(1), "the killed create did not finish")

	g.Eventually(func(g Gomega) {
		settled(g, tf, effects)
		g.Expect(began(effects)).To(Equal(3), "the new plan created the resource again")
	}, retryInterval+time.Minute, 250*time.Millisecond).Should(Succeed(), "converged within retryInterval plus a minute of the kill")
	t.Logf("converged %s after the kill", time.Since(killed).Round(time.Second))
	n, finished := creates(effects)
	g.Expect(n).To(Equal(3), "first apply, the killed create, the create of the new plan")
	g.Expect(finished).To(Equal(2))
	g.Expect(events(g, tf, infrav1.RunLostReason)).NotTo(BeEmpty(), "the lost run is reported")
	g.Expect(events(g, tf, infrav1.StateLockReleasedReason)).To(ContainElement(ContainSubstring(lock.ID)), "the released lock is named")
	after := readState(g, tf)
	g.Expect(after.Lineage).To(Equal(before.Lineage), "the same state")
	g.Expect(after.Serial).To(BeNumerically(">", before.Serial), "the state's serial only grew")
	g.Eventually(func(g Gomega) { g.Expect(runnerPods(g, ns)).To(BeEmpty()) }, time.Minute, 250*time.Millisecond).Should(Succeed(), "the runner Pods are removed")
}

// deletionPolicy Orphan while a runner Pod applies: the run is
// interrupted, and the object waits for it. Terraform stops the create
// and writes the resource it began (tainted) through the state identity,
// which must still be there; only then do the identity and the finalizer
// go. The state keeps what the apply created, no lock is left and no
// unsaved state waits: re-creating the object later finds the resource.
func TestOrphanMidPodApplyKeepsWhatTheApplyWrote(t *testing.T) {
	g := NewWithT(t)
	ns := runnerNamespace(t)
	suite.Publish(t, ns, map[string]string{"main.tf": slowModule})
	startKubelet(t)
	startController(t, pods, t.TempDir())
	effects := filepath.Join(t.TempDir(), "effects")
	tf := slowTerraform(ns, "orphanmid", effects, 30)
	tf.Spec.DeletionPolicy = infrav1.DeletionPolicyOrphan
	g.Expect(suite.Env.Client.Create(context.Background(), tf)).To(Succeed())
	logOnFailure(t, tf)

	g.Eventually(func() int { return began(effects) }, 2*time.Minute, 100*time.Millisecond).Should(Equal(1), "the create has begun")
	g.Expect(get(g, tf).Status.Run.Action).To(Equal("apply"))
	g.Expect(suite.Env.Client.Delete(context.Background(), tf)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(suite.Env.Client.Get(context.Background(), client.ObjectKeyFromObject(tf), &infrav1.Terraform{}))
	}, 2*time.Minute, 250*time.Millisecond).Should(BeTrue(), "the object goes once its run ended")

	_, finished := creates(effects)
	g.Expect(finished).To(Equal(0), "the create was interrupted, not waited out")
	st := readState(g, tf)
	var types []string
	for _, r := range st.Resources {
		types = append(types, r.Type+"."+r.Name)
	}
	g.Expect(types).To(ContainElement("terraform_data.this"), "the state holds the resource the interrupted apply began")
	noLock(g, tf)
	var unsaved corev1.SecretList
	g.Expect(suite.Env.Client.List(context.Background(), &unsaved, client.InNamespace(ns), client.HasLabels{"infra.landform.dev/unsaved-state"})).To(Succeed())
	g.Expect(unsaved.Items).To(BeEmpty(), "nothing left unsaved")
	g.Expect(apierrors.IsNotFound(suite.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: names.StateIdentity(tf)}, &corev1.ServiceAccount{}))).To(BeTrue(), "the state identity went after the run")
}
