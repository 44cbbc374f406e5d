package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/testenv"
)

// tenantNamespace creates namespace name (replacing one an earlier run
// left), with the runner ServiceAccount when withRunner, as a platform
// team onboarding a tenant would; deleted when the test ends.
func (e *env) tenantNamespace(t *testing.T, name string, withRunner bool) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	e.deleteAndWait(t, ns)
	if err := e.client.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() { e.deleteAndWait(t, ns) })
	if withRunner {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: runnerSA}}
		if err := e.client.Create(ctx, sa); err != nil {
			t.Fatalf("creating the runner ServiceAccount in %s: %v", name, err)
		}
	}
}

// tenantObject is an auto-approved terraform_data object in namespace ns,
// its source in the suite's namespace named by sourceNS ("" for its own).
func tenantObject(ns, name, sourceNS string) *infrav1.Terraform {
	spec := autoSpec("tenancy", "./m", 5*time.Second)
	spec.SourceRef.Namespace = sourceNS
	spec.Vars = []infrav1.Variable{{Name: "tenant", Value: testenv.JSONValue(ns)}}
	spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{Name: name + "-outputs"}
	return &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

const tenancyModule = `
variable "tenant" { type = string }
resource "terraform_data" "x" { input = var.tenant }
output "tenant" { value = terraform_data.x.output }
`

// Tenancy on the real cluster, as the chart installs Landform (cross-
// namespace references not allowed): a reference to another namespace's
// source is refused with CrossNamespaceRefDenied and no runner starts; a
// namespace without the runner ServiceAccount gets
// RunnerServiceAccountMissing naming what to create, and runs once it
// exists; a namespace deleted and created again gets a working runner
// certificate (its Secret re-issued) without a controller restart.
func TestTenancy(t *testing.T) {
	e := connect(t)
	ctx := context.Background()
	e.gitRepository(t, "tenancy", map[string]string{"m/main.tf": tenancyModule})

	t.Run("cross-namespace source refused", func(t *testing.T) {
		const ns = "e2e-tenant-a"
		e.tenantNamespace(t, ns, true)
		tf := tenantObject(ns, "crossref", e.ns)
		if err := e.client.Create(ctx, tf); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.deleteAndWait(t, tf) })
		cur := e.waitForTerraform(t, tf, "CrossNamespaceRefDenied", func(tf *infrav1.Terraform) bool {
			c := ready(tf)
			return c != nil && c.Reason == infrav1.CrossNamespaceRefDeniedReason
		})
		if msg := ready(cur).Message; !strings.Contains(msg, e.ns) {
			t.Errorf("the message %q does not name the other namespace %s", msg, e.ns)
		}
		if cur.Status.Run != nil || cur.Status.Plan != nil {
			t.Errorf("a refused object ran: run %+v, plan %+v", cur.Status.Run, cur.Status.Plan)
		}
	})

	t.Run("runner ServiceAccount missing", func(t *testing.T) {
		const ns = "e2e-tenant-b"
		e.tenantNamespace(t, ns, false)
		e.gitRepositoryIn(t, ns, "tenancy", map[string]string{"m/main.tf": tenancyModule})
		tf := tenantObject(ns, "nosa", "")
		if err := e.client.Create(ctx, tf); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.deleteAndWait(t, tf) })
		cur := e.waitForTerraform(t, tf, "RunnerServiceAccountMissing", func(tf *infrav1.Terraform) bool {
			c := ready(tf)
			return c != nil && c.Reason == infrav1.RunnerServiceAccountMissingReason
		})
		if msg := ready(cur).Message; !strings.Contains(msg, runnerSA) {
			t.Errorf("the message %q does not name the ServiceAccount %s", msg, runnerSA)
		}
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: runnerSA}}
		if err := e.client.Create(ctx, sa); err != nil {
			t.Fatal(err)
		}
		e.waitForTerraform(t, tf, "Ready once the ServiceAccount exists", readyTrue)
	})

	t.Run("namespace deleted first", func(t *testing.T) {
		e.namespaceDeletedFirst(t)
	})

	t.Run("namespace recreated", func(t *testing.T) {
		const ns = "e2e-tenant-c"
		for round := 1; round <= 2; round++ {
			e.tenantNamespace(t, ns, true)
			e.gitRepositoryIn(t, ns, "tenancy", map[string]string{"m/main.tf": tenancyModule})
			tf := tenantObject(ns, "recreated", "")
			if err := e.client.Create(ctx, tf); err != nil {
				t.Fatal(err)
			}
			e.waitForTerraform(t, tf, "Ready in round "+string(rune('0'+round)), readyTrue)
			var out corev1.Secret
			if err := e.client.Get(ctx, keyOf(ns, "recreated-outputs"), &out); err != nil || string(out.Data["tenant"]) != ns {
				t.Fatalf("round %d: the outputs Secret: %v, tenant %q", round, err, out.Data["tenant"])
			}
			// The namespace goes with everything in it, the object (its
			// destroy) first.
			e.deleteAndWait(t, tf)
			e.deleteAndWait(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		}
	})
}
