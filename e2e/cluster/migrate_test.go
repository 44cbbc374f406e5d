package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/cli"
	"github.com/landform-dev/landform/internal/tfstate"
)

// envTofuController says tofu-controller runs in the cluster, its runners
// allowed in the suite's namespace (e2e/cluster/migrate-peer.sh).
const envTofuController = "LANDFORM_CLUSTER_TOFU_CONTROLLER"

// migratedModule keeps a value in its state and hands it out.
const migratedModule = `
variable "size" { type = number }
resource "terraform_data" "db" { input = var.size }
output "db_id" { value = terraform_data.db.id }
output "size" { value = var.size }
`

// TestMigrateFromTofuController follows docs/migrating-from-tofu-
// controller.md on a real tofu-controller: an object it applied, with
// approvePlan auto and its outputs in a Secret, is suspended, migrated
// with `landform migrate` from the cluster, its outputs Secret handed
// over, the old object removed as the guide says, and the Landform object
// applied. Landform adopts the state: the first plan changes nothing (the
// same resource id), the outputs Secret keeps its values, and the state's
// lineage is the same.
func TestMigrateFromTofuController(t *testing.T) {
	if os.Getenv(envTofuController) == "" {
		t.Skip("no tofu-controller in the cluster: run with `make migrate-peer TOFU_CONTROLLER_SRC=DIR` (e2e/cluster/README.md)")
	}
	e := connect(t)
	g := NewWithT(t)
	ctx := context.Background()
	const name = "migrated"
	e.deleteLeftovers(t, name, "tfstate-default-"+name, name+"-outputs")
	e.gitRepository(t, name, map[string]string{"db/main.tf": migratedModule})

	// 1. tofu-controller applies it.
	tc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infra.contrib.fluxcd.io/v1alpha2", "kind": "Terraform",
		"metadata": map[string]any{"namespace": e.ns, "name": name},
		"spec": map[string]any{
			"interval": "1h", "approvePlan": "auto", "path": "./db",
			"sourceRef":            map[string]any{"kind": "GitRepository", "name": name},
			"vars":                 []any{map[string]any{"name": "size", "value": 10}},
			"writeOutputsToSecret": map[string]any{"name": name + "-outputs"},
		},
	}}
	g.Expect(e.client.Create(ctx, tc)).To(Succeed())
	t.Cleanup(func() { e.forgetTofuObject(t, name) })
	var before map[string][]byte
	g.Eventually(func(g Gomega) {
		var s corev1.Secret
		g.Expect(e.client.Get(ctx, keyOf(e.ns, name+"-outputs"), &s)).To(Succeed())
		g.Expect(s.Data).To(HaveKey("db_id"))
		before = s.Data
	}).WithTimeout(e.timeout).WithPolling(time.Second).Should(Succeed(), "tofu-controller applies and writes its outputs")
	lineage := e.stateLineage(g, name)

	// 2. Suspend it, and wait until no run is in flight.
	g.Expect(e.client.Patch(ctx, tc, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"suspend":true}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(e.client.List(ctx, &pods, client.InNamespace(e.ns))).To(Succeed())
		for _, p := range pods.Items {
			g.Expect(p.Name).NotTo(HavePrefix(name+"-tf-runner"), "a runner of tofu-controller is still there")
		}
	}).WithTimeout(e.timeout).WithPolling(time.Second).Should(Succeed())

	// 1 (the guide's first step). landform migrate from the cluster.
	var out, report bytes.Buffer
	err := cli.Execute(ctx, cli.Options{Streams: genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &report}},
		[]string{"--kubeconfig", os.Getenv(envKubeconfig), "-n", e.ns, "migrate", name})
	g.Expect(err).NotTo(HaveOccurred(), report.String())
	t.Logf("landform migrate reported:\n%s", report.String())
	g.Expect(report.String()).To(ContainSubstring("adopts Secret tfstate-default-" + name))
	g.Expect(report.String()).To(ContainSubstring("approvePlan auto became manual approval for the first apply"))
	migrated := &infrav1.Terraform{}
	g.Expect(yaml.UnmarshalStrict(bytes.TrimPrefix(out.Bytes(), []byte("---\n")), migrated)).To(Succeed(), out.String())
	g.Expect(migrated.Spec.DeletionPolicy).To(Equal(infrav1.DeletionPolicyOrphan))
	g.Expect(migrated.Spec.ApprovePlan).To(BeEmpty())

	// 3. Hand the outputs Secret over.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name + "-outputs"}}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": nil,
		"labels":          map[string]string{infrav1.ManagedByLabel: infrav1.ManagedByValue, infrav1.OwnerNameLabel: name},
	}})
	g.Expect(e.client.Patch(ctx, secret, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())

	// 4. Remove the old object: delete, then clear its finalizers.
	e.forgetTofuObject(t, name)

	// 5. Apply the Landform object (it was suspended: resume it as the
	// report says).
	migrated.Spec.Suspend = false
	tf := e.terraform(t, migrated)

	// 6. The first plan changes nothing: Ready without an approval.
	cur := e.waitForTerraform(t, tf, "Ready after a first plan without changes", func(tf *infrav1.Terraform) bool {
		return readyTrue(tf) && tf.Status.Plan != nil && tf.Status.Plan.Pending == ""
	})
	if p := cur.Status.Plan; p.Add+p.Change+p.Destroy != 0 {
		t.Errorf("the first plan changes %+v, want nothing", p)
	}
	g.Expect(e.stateLineage(g, name)).To(Equal(lineage), "the state Landform adopted is tofu-controller's")
	g.Eventually(func(g Gomega) {
		var s corev1.Secret
		g.Expect(e.client.Get(ctx, keyOf(e.ns, name+"-outputs"), &s)).To(Succeed())
		g.Expect(string(s.Data["db_id"])).To(Equal(string(before["db_id"])), "the same resource")
		g.Expect(string(s.Data["size"])).To(Equal("10"))
	}).WithTimeout(e.timeout).WithPolling(time.Second).Should(Succeed(), "the outputs Secret keeps its values")
}

// stateLineage is the lineage of name's state.
func (e *env) stateLineage(g Gomega, name string) string {
	var s corev1.Secret
	g.Expect(e.client.Get(context.Background(), keyOf(e.ns, "tfstate-default-"+name), &s)).To(Succeed())
	raw, err := tfstate.Decompress(s.Data[tfstate.DataKey])
	g.Expect(err).NotTo(HaveOccurred())
	id, err := tfstate.ReadIdentity(raw)
	g.Expect(err).NotTo(HaveOccurred())
	return id.Lineage
}

// forgetTofuObject removes tofu-controller's object name as the guide's
// step 4 does: deleted, then its finalizers cleared, nothing destroyed.
func (e *env) forgetTofuObject(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	tc := &unstructured.Unstructured{}
	tc.SetAPIVersion("infra.contrib.fluxcd.io/v1alpha2")
	tc.SetKind("Terraform")
	tc.SetNamespace(e.ns)
	tc.SetName(name)
	if err := e.client.Delete(ctx, tc); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting tofu-controller's %s: %v", name, err)
		return
	}
	if err := e.client.Patch(ctx, tc, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("clearing the finalizers of tofu-controller's %s: %v", name, err)
	}
	e.waitGone(t, tc)
}
