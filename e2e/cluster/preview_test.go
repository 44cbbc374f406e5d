package cluster

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/testenv"
)

// previewTarget is a module with one resource whose input the preview
// changes.
const previewTarget = `
variable "size" { type = number }
resource "terraform_data" "db" { input = var.size }
`

// TestPreviewInARunnerPod: a preview's plan runs in a runner Pod that
// reaches only the preview's own state, a snapshot of the target's: it
// plans the change, the target's state Secret and Lease are untouched,
// and deleting the preview destroys nothing.
func TestPreviewInARunnerPod(t *testing.T) {
	e := connect(t)
	ctx := context.Background()
	const name, preview = "previewed", "previewed-pr-1"
	e.deleteLeftovers(t, preview, "tfstate-default-"+preview)
	e.deleteLeftovers(t, name, "tfstate-default-"+name)
	e.gitRepository(t, name, map[string]string{"db/main.tf": previewTarget})
	spec := autoSpec(name, "./db", 5*time.Second)
	spec.Vars = []infrav1.Variable{{Name: "size", Value: testenv.JSONValue(10)}}
	target := e.terraform(t, &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
	applied := e.waitForTerraform(t, target, "Ready", readyTrue)

	var state corev1.Secret
	var lease coordinationv1.Lease
	if err := e.client.Get(ctx, keyOf(e.ns, "tfstate-default-"+name), &state); err != nil {
		t.Fatal(err)
	}
	if err := e.client.Get(ctx, keyOf(e.ns, "lock-tfstate-default-"+name), &lease); err != nil {
		t.Fatal(err)
	}

	seen := e.watchRunnerPods(t, preview)
	pspec := autoSpec(name, "./db", 5*time.Second)
	pspec.ApprovePlan = ""
	pspec.Vars = []infrav1.Variable{{Name: "size", Value: testenv.JSONValue(20)}}
	pspec.Preview = &infrav1.PreviewSpec{StateFrom: &infrav1.PreviewTarget{Name: name}}
	pr := e.terraform(t, &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Name: preview}, Spec: pspec})
	cur := e.waitForTerraform(t, pr, "a preview plan", func(tf *infrav1.Terraform) bool {
		return readyTrue(tf) && tf.Status.Plan != nil && tf.Status.Preview != nil
	})
	if p := cur.Status.Plan; p.Pending == "" || p.Add+p.Change == 0 {
		t.Errorf("preview plan %+v: want the change of size pending", p)
	}
	if st := cur.Status.Preview; st.StateSerial == 0 || st.TargetAppliedPlan != applied.Status.LastAppliedPlan {
		t.Errorf("snapshot %+v: want the target's state after plan %s", st, applied.Status.LastAppliedPlan)
	}
	if len(seen.pods()) == 0 {
		t.Error("no runner Pod of the preview was seen Running")
	}

	e.deleteAndWait(t, pr)
	var after corev1.Secret
	var leaseAfter coordinationv1.Lease
	if err := e.client.Get(ctx, keyOf(e.ns, "tfstate-default-"+name), &after); err != nil {
		t.Fatal(err)
	}
	if err := e.client.Get(ctx, keyOf(e.ns, "lock-tfstate-default-"+name), &leaseAfter); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != state.ResourceVersion || leaseAfter.ResourceVersion != lease.ResourceVersion {
		t.Errorf("the target's state Secret (%s → %s) or Lease (%s → %s) changed under a preview",
			state.ResourceVersion, after.ResourceVersion, lease.ResourceVersion, leaseAfter.ResourceVersion)
	}
	if err := e.client.Get(ctx, keyOf(e.ns, "tfstate-default-"+preview), &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the preview's snapshot outlived it: %v", err)
	}
	if now := e.waitForTerraform(t, target, "Ready", readyTrue); now.Status.LastAppliedPlan != applied.Status.LastAppliedPlan {
		t.Errorf("the target applied %s after the preview, want nothing new (%s)", now.Status.LastAppliedPlan, applied.Status.LastAppliedPlan)
	}
}
