package controllers

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/testenv"
)

// tryModule runs var.try (the trystate program) from a local-exec
// provisioner: module code, in the runner, with what the runner gives it.
const tryModule = `
variable "try" {
  type = string
}

resource "terraform_data" "try" {
  provisioner "local-exec" {
    command = var.try
  }
}
`

// Module code in a runner reaches the API server only as the object's
// state identity: its own state Secret and Lease work, and every other
// Secret of the namespace — the object's plan, outputs and run logs,
// another object's state, anything else — is refused, as is creating
// Secrets or Leases. SubjectAccessReviews say the same of the identity.
func TestRunnersReachOnlyTheirOwnState(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	bin := filepath.Join(t.TempDir(), "trystate")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/trystate").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))

	// What a neighbour leaves in the namespace.
	for _, name := range []string{"unrelated", "tfstate-default-neighbour"} {
		g.Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{"value": "s3cr3t-" + name}})).To(Succeed())
	}
	const name = "tries"
	state, lease := "tfstate-default-"+name, "lock-tfstate-default-"+name
	denied := []string{
		"get:secret/tfplan-" + name + "-0", "patch:secret/tfplan-" + name + "-0",
		"get:secret/" + name + "-outputs", "patch:secret/" + name + "-outputs",
		"get:secret/tflogs-" + name, "patch:secret/tflogs-" + name,
		"get:secret/unrelated", "patch:secret/unrelated", "delete:secret/unrelated",
		"get:secret/tfstate-default-neighbour", "patch:secret/tfstate-default-neighbour",
		"create:secret/planted", "create:lease/planted",
		"get:lease/lock-tfstate-default-neighbour",
	}
	allowed := []string{"get:secret/" + state, "patch:secret/" + state, "get:lease/" + lease, "patch:lease/" + lease}
	results := filepath.Join(t.TempDir(), "results.json")
	command := strings.Join(append([]string{bin, "-kubeconfig", ".landform-state.kubeconfig", "-namespace", ns, "-out", results, "list:secret"}, append(denied, allowed...)...), " ")

	newGitRepository(t, ns, "repo", artifacts.publish(map[string]string{"modules/try/main.tf": tryModule}))
	tf := newTerraform(t, ns, name, func(tf *infrav1.Terraform) {
		tf.Spec.Path = "modules/try"
		tf.Spec.Vars = []infrav1.Variable{{Name: "try", Value: testenv.JSONValue(command)}}
		tf.Spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{Name: name + "-outputs"}
	})
	waitReady(t, tf)

	raw, err := os.ReadFile(results)
	g.Expect(err).NotTo(HaveOccurred(), "the module ran")
	var got map[string]string
	g.Expect(json.Unmarshal(raw, &got)).To(Succeed())
	for _, op := range denied {
		g.Expect(got).To(HaveKeyWithValue(op, "forbidden"), op)
	}
	for _, op := range allowed {
		g.Expect(got).To(HaveKeyWithValue(op, "allowed"), op)
	}
	g.Expect(got).To(HaveKeyWithValue("list:secret", "listed "+state), "a list shows the state Secret alone")
	var unrelated corev1.Secret
	g.Expect(k8sClient.Get(ctx, keyOf(ns, "unrelated"), &unrelated)).To(Succeed(), "nothing deleted")

	// The identity, asked directly.
	user := "system:serviceaccount:" + ns + ":" + names.StateIdentity(get(g, tf))
	can := func(verb, group, resource, name string) bool {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               user,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: resource, Name: name},
		}}
		g.Expect(k8sClient.Create(ctx, sar)).To(Succeed())
		return sar.Status.Allowed
	}
	for _, verb := range []string{"get", "update", "patch"} {
		g.Expect(can(verb, "", "secrets", state)).To(BeTrue(), verb+" the state Secret")
		g.Expect(can(verb, "coordination.k8s.io", "leases", lease)).To(BeTrue(), verb+" the state Lease")
		for _, other := range []string{"tfplan-" + name + "-0", name + "-outputs", "tflogs-" + name, "unrelated", "tfstate-default-neighbour"} {
			g.Expect(can(verb, "", "secrets", other)).To(BeFalse(), verb+" Secret "+other)
		}
	}
	g.Expect(can("list", "", "secrets", "")).To(BeFalse(), "list every Secret")
	g.Expect(can("create", "", "secrets", "")).To(BeFalse(), "create Secrets")
	g.Expect(can("delete", "", "secrets", state)).To(BeFalse(), "delete the state")
	g.Expect(can("create", "", "pods", "")).To(BeFalse(), "create Pods")
}

// The state Lease and the state identity's Role deleted behind
// Landform's back (a cleanup script, `kubectl delete lease`): the identity
// cannot create them itself, so the run that meets their absence fails,
// and the next one makes them again and converges, without a controller
// restart.
func TestDeletedStateLeaseAndRoleAreMadeAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	const name = "release"
	tf, path := newFileTerraform(t, ns, name, "one", nil)
	waitReady(t, tf)

	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lock-tfstate-default-" + name}}
	g.Expect(k8sClient.Delete(ctx, lease)).To(Succeed())
	g.Expect(k8sClient.Delete(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "landform-state-" + name}})).To(Succeed())
	obj := get(g, tf)
	obj.Spec.Vars = fileVars(path, "two")
	g.Expect(k8sClient.Update(ctx, obj)).To(Succeed())

	waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(obj.Status.ObservedGeneration).To(Equal(obj.Generation))
		g.Expect(conditions.IsReady(obj)).To(BeTrue(), "Ready")
	})
	g.Expect(readFile(path)).To(Equal("two"), "the change was applied")
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(lease), &coordinationv1.Lease{})).To(Succeed(), "the Lease is back")
	g.Expect(k8sClient.Get(ctx, keyOf(ns, "landform-state-"+name), &rbacv1.Role{})).To(Succeed(), "the Role is back")
}
