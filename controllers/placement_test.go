package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/certs"
	"github.com/landform-dev/landform/internal/placement"
)

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
