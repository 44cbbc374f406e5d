package cli

import (
	"context"
	"encoding/json"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/outputs"
)

// writeOutputs writes the module outputs into obj's outputs Secret as the
// controller does.
func writeOutputs(t *testing.T, obj *v1alpha1.Terraform) {
	t.Helper()
	outs := []outputs.Output{
		{Name: "dsn", Value: json.RawMessage(`"postgres://admin:s3cr3t-new@db:5432/app"`), Sensitive: true},
		{Name: "security_group_id", Value: json.RawMessage(`"sg-40"`)},
		{Name: "cache", Value: json.RawMessage(`{"name":"cache-40","port":6379}`)},
	}
	spec := *obj.Spec.WriteOutputsToSecret
	data, err := outputs.SecretData(outs, spec.Outputs)
	if err != nil {
		t.Fatal(err)
	}
	if err := outputs.Write(context.Background(), env.Client, obj, spec, data); err != nil {
		t.Fatal(err)
	}
}

func TestOutputs(t *testing.T) {
	ns := namespace(t, "outputs")
	withOutputs := func(set func(*v1alpha1.Terraform), selection ...string) func(*v1alpha1.Terraform) {
		return func(obj *v1alpha1.Terraform) {
			set(obj)
			obj.Spec.WriteOutputsToSecret = &v1alpha1.WriteOutputsToSecretSpec{Name: obj.Name + "-outputs", Outputs: selection}
			obj.Status.AvailableOutputs = []string{"cache", "dsn", "security_group_id"}
		}
	}
	all := terraform(t, ns, "all", withOutputs(applied))
	storePlan(t, all, appliedPlan, rev1, true)
	writeOutputs(t, all)

	aliased := terraform(t, ns, "aliased", withOutputs(applied, "dsn", "dsn:DATABASE_URL", "security_group_id:sg"))
	storePlan(t, aliased, appliedPlan, rev1, true)
	writeOutputs(t, aliased)

	noPlan := terraform(t, ns, "no-plan", withOutputs(applied))
	writeOutputs(t, noPlan)

	terraform(t, ns, "not-written", withOutputs(applied))
	terraform(t, ns, "no-secret", func(obj *v1alpha1.Terraform) {
		applied(obj)
		obj.Status.AvailableOutputs = []string{"dsn", "security_group_id"}
	})
	terraform(t, ns, objNew, nil)
	grant(t, ns, "viewer", rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"terraforms"}, Verbs: []string{"get"}})

	for _, tt := range []struct {
		golden string
		args   []string
	}{
		{"outputs/hidden", []string{"outputs", "-n", ns, "all"}},
		{"outputs/show-sensitive", []string{"outputs", "-n", ns, "all", "--show-sensitive"}},
		{"outputs/json", []string{"outputs", "-n", ns, "all", "-o", "json"}},
		{"outputs/yaml-show-sensitive", []string{"outputs", "-n", ns, "all", "-o", "yaml", "--show-sensitive"}},
		{"outputs/aliased", []string{"outputs", "-n", ns, "aliased"}},
		{"outputs/no-plan", []string{"outputs", "-n", ns, "no-plan"}},
		{"outputs/not-written", []string{"outputs", "-n", ns, "not-written"}},
		{"outputs/no-secret", []string{"outputs", "-n", ns, "no-secret"}},
		{"outputs/none", []string{"outputs", "-n", ns, objNew}},
		{"outputs/forbidden", []string{"outputs", "-n", ns, "all", "--as", "viewer"}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			golden(t, tt.golden, run(t, "", tt.args...).transcript())
		})
	}
}
