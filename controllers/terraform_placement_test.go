package controllers

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/certs"
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
// podPlacementLabel=terraform.
type routingPlacer struct {
	pod, local, terraform placement.Placer
}

func (r *routingPlacer) pick(obj *infrav1.Terraform) placement.Placer {
	switch obj.Labels[podPlacementLabel] {
	case "pod":
		return r.pod
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
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "landform-system"}}); client.IgnoreAlreadyExists(err) != nil {
		return nil, err
	}
	m, err := certs.New(ctx, c, certs.Options{Namespace: "landform-system"})
	if err != nil {
		return nil, err
	}
	return &placement.Pod{Client: c, Certs: m, Image: "landform-runner:test", StartTimeout: 3 * time.Second, Policy: lockdownPolicy}, nil
}
