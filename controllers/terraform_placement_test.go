package controllers

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/certs"
	"github.com/landform-dev/landform/internal/fakekubelet"
	"github.com/landform-dev/landform/internal/placement"
)

// Through the controller, runner Pods that cannot run end in a condition
// that says why: a missing ServiceAccount, then a Pod that never starts
// (envtest has no kubelet). Nothing is left behind. The Pod path that runs
// (create, wait, dial with mTLS, run, delete) is covered with a fake kubelet
// and the real runner in internal/placement.
func TestRunnerPodConditions(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	tf, _ := newFileTerraform(t, ns, "pod", "x", func(tf *infrav1.Terraform) {
		tf.Labels = map[string]string{podPlacementLabel: "pod"}
	})

	obj := waitNotReady(t, tf, infrav1.RunnerServiceAccountMissingReason)
	g.Expect(readyMessageOf(obj)).To(ContainSubstring("landform-runner"))
	g.Expect(runnerPods(g, ns)).To(BeEmpty(), "no Pod without its ServiceAccount")

	g.Expect(k8sClient.Create(context.Background(), &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "landform-runner"},
	})).To(Succeed())
	obj = waitNotReady(t, tf, infrav1.RunnerStartTimeoutReason)
	g.Expect(readyMessageOf(obj)).To(ContainSubstring("pod-runner-"))
	g.Expect(obj.Status.LastAppliedRevision).To(BeEmpty())

	// The runner's certificate Secret exists in the namespace, without the CA key.
	s := &corev1.Secret{}
	g.Expect(k8sClient.Get(context.Background(), keyOf(ns, "landform-runner-tls"), s)).To(Succeed())
	g.Expect(s.Data).To(HaveKey("ca.crt"))
	g.Expect(s.Data).NotTo(HaveKey("ca.key"))
	// The Pod that never started is deleted, not left behind.
	g.Eventually(func(g Gomega) { g.Expect(runnerPods(g, ns)).To(BeEmpty()) }).WithTimeout(waitTimeout).Should(Succeed())
}

func runnerPods(g Gomega, ns string) []string {
	pods := &corev1.PodList{}
	g.Expect(k8sClient.List(context.Background(), pods, client.InNamespace(ns))).To(Succeed())
	var names []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp.IsZero() {
			names = append(names, p.Name)
		}
	}
	return names
}

// podPlacementLabel sends an object's runs to the Pod placer in this suite
// (every other object runs on local runners).
const podPlacementLabel = "test.landform.dev/placement"

// routingPlacer picks the placement per object, so one suite covers both,
// and the engine of local runners: tofu, or terraform for objects labelled
// podPlacementLabel=terraform. Objects labelled podPlacementLabel=kubelet
// get runner Pods that run, in a namespace a test runs a kubelet for
// (startKubelet); podPlacementLabel=reuse, such Pods kept for reuse
// (reusingPodPlacer), and =keep, kept for an hour (keepingPlacer).
type routingPlacer struct {
	pod, kubelet, reuse, keep, local, terraform placement.Placer
}

func (r *routingPlacer) pick(obj *infrav1.Terraform) placement.Placer {
	switch obj.Labels[podPlacementLabel] {
	case "pod":
		return r.pod
	case "kubelet":
		return r.kubelet
	case "reuse":
		return r.reuse
	case "keep":
		return r.keep
	case "terraform":
		return r.terraform
	}
	return r.local
}

func (r *routingPlacer) Start(ctx context.Context, obj *infrav1.Terraform, runID string) (*placement.Run, error) {
	return r.pick(obj).Start(ctx, obj, runID)
}

func (r *routingPlacer) Attach(ctx context.Context, obj *infrav1.Terraform, runID string) (*placement.Run, error) {
	return r.pick(obj).Attach(ctx, obj, runID)
}

// Durable is false: the suite's local runners end with the suite.
func (r *routingPlacer) Durable() bool { return false }

// Check asks the object's placer, when it checks objects (the Pod placer).
func (r *routingPlacer) Check(obj *infrav1.Terraform) error {
	if c, ok := r.pick(obj).(placement.Checker); ok {
		return c.Check(obj)
	}
	return nil
}

// newPodPlacer is the Pod placement as the controller builds it in a
// cluster. envtest has no kubelet: its Pods never start.
func newPodPlacer(c client.Client) (*placement.Pod, error) {
	ctx := context.Background()
	// landform-system is the controller's own namespace (made by
	// testenv.ControllerConfig, as an installation makes it).
	m, err := certs.New(ctx, c, certs.Options{Namespace: "landform-system"})
	if err != nil {
		return nil, err
	}
	return &placement.Pod{Client: c, Certs: m, Image: "landform-runner:test", StartTimeout: 3 * time.Second, Policy: lockdownPolicy}, nil
}

// kubeletPodPort is the port of the runners in Pods that startKubelet
// runs: not the default, which e2e/durable's runner Pods listen on, on the
// same 127.0.0.N addresses, when packages are tested at once.
const kubeletPodPort = 9543

// runningPodPlacer is the Pod placement for runner Pods that run
// (startKubelet): the suite's, without the lockdown policy, with the time
// a runner needs to start.
func runningPodPlacer(p *placement.Pod) *placement.Pod {
	running := *p
	running.StartTimeout, running.Policy, running.Port = time.Minute, placement.PodPolicy{}, kubeletPodPort
	return &running
}

// startKubelet plays the kubelet for the runner Pods of namespace ns until
// t ends (objects labelled podPlacementLabel=kubelet): each runs the real
// runner, its environment and volumes resolved from the Pod, with tofu on
// its PATH and an in-cluster view of the suite's API server. It skips t
// where the fake kubelet cannot give that view (fakekubelet.CheckInCluster).
func startKubelet(t *testing.T, ns string) *fakekubelet.Kubelet {
	t.Helper()
	if err := fakekubelet.CheckInCluster(); err != nil {
		t.Skipf("runner Pods need an in-cluster view of the API server, which the fake kubelet cannot give here: %v", err)
	}
	g := NewWithT(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "path")
	g.Expect(os.MkdirAll(path, 0o755)).To(Succeed())
	g.Expect(os.Symlink(tofuPath, filepath.Join(path, "tofu"))).To(Succeed())
	k := fakekubelet.New(fakekubelet.Options{
		Client:       k8sClient,
		Namespace:    ns,
		RunnerBinary: runnerBinPath,
		Path:         path + string(os.PathListSeparator) + os.Getenv("PATH"),
		Dir:          filepath.Join(dir, "kubelet"),
		Logs:         runnerLogs,
		APIServer:    restCfg,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); k.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	g.Expect(k8sClient.Create(context.Background(), &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "landform-runner"},
	})).To(Succeed())
	return k
}
