package cli

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSetApprovePlan(t *testing.T) {
	const id = "plan-2222222222-b2b2b2b2b2"
	for _, tt := range []struct {
		name, in, want string
		already        bool
		err            string
	}{
		{
			name: "added above the first key's comment",
			in: `# the team's database
apiVersion: infra.landform.dev/v1alpha1
kind: Terraform
metadata:
  name: database
  namespace: team-a
spec:   # reviewed in PRs
    # where the module is
    path: ./modules/database
    sourceRef: {kind: GitRepository, name: infra}
`,
			want: `# the team's database
apiVersion: infra.landform.dev/v1alpha1
kind: Terraform
metadata:
  name: database
  namespace: team-a
spec:   # reviewed in PRs
    approvePlan: plan-2222222222-b2b2b2b2b2
    # where the module is
    path: ./modules/database
    sourceRef: {kind: GitRepository, name: infra}
`,
		},
		{
			name: "replaced, quotes and comment kept, other documents untouched",
			in: `apiVersion: v1
kind: ConfigMap
metadata: {name: database}
---
apiVersion: infra.landform.dev/v1alpha1
kind: Terraform
metadata:
  name: other
  namespace: team-a
spec:
  approvePlan: "plan-1111111111-a1a1a1a1a1"
---
apiVersion: infra.landform.dev/v1alpha1
kind: Terraform
metadata:
  name: database
  namespace: team-a
spec:
  path: ./modules/database
  approvePlan: "plan-1111111111-a1a1a1a1a1"  # last week's
  interval: 1h
`,
			want: `apiVersion: v1
kind: ConfigMap
metadata: {name: database}
---
apiVersion: infra.landform.dev/v1alpha1
kind: Terraform
metadata:
  name: other
  namespace: team-a
spec:
  approvePlan: "plan-1111111111-a1a1a1a1a1"
---
apiVersion: infra.landform.dev/v1alpha1
kind: Terraform
metadata:
  name: database
  namespace: team-a
spec:
  path: ./modules/database
  approvePlan: "plan-2222222222-b2b2b2b2b2"  # last week's
  interval: 1h
`,
		},
		{
			name: "plain value, CRLF, no namespace (kustomize sets it)",
			in:   "apiVersion: infra.landform.dev/v1alpha1\r\nkind: Terraform\r\nmetadata:\r\n  name: database\r\nspec:\r\n  approvePlan: plan-1111111111-a1a1a1a1a1\r\n  path: ./m\r\n",
			want: "apiVersion: infra.landform.dev/v1alpha1\r\nkind: Terraform\r\nmetadata:\r\n  name: database\r\nspec:\r\n  approvePlan: plan-2222222222-b2b2b2b2b2\r\n  path: ./m\r\n",
		},
		{
			name: "added with CRLF",
			in:   "apiVersion: infra.landform.dev/v1alpha1\r\nkind: Terraform\r\nmetadata:\r\n  name: database\r\nspec:\r\n  path: ./m\r\n",
			want: "apiVersion: infra.landform.dev/v1alpha1\r\nkind: Terraform\r\nmetadata:\r\n  name: database\r\nspec:\r\n  approvePlan: plan-2222222222-b2b2b2b2b2\r\n  path: ./m\r\n",
		},
		{
			name: "empty value filled",
			in:   "apiVersion: infra.landform.dev/v1alpha1\nkind: Terraform\nmetadata:\n  name: database\nspec:\n  approvePlan:\n  path: ./m\n",
			want: "apiVersion: infra.landform.dev/v1alpha1\nkind: Terraform\nmetadata:\n  name: database\nspec:\n  approvePlan: plan-2222222222-b2b2b2b2b2\n  path: ./m\n",
		},
		{
			name: "single quotes",
			in:   "apiVersion: infra.landform.dev/v1alpha1\nkind: Terraform\nmetadata:\n  name: database\n  namespace: team-a\nspec:\n  approvePlan: 'plan-1'\n",
			want: "apiVersion: infra.landform.dev/v1alpha1\nkind: Terraform\nmetadata:\n  name: database\n  namespace: team-a\nspec:\n  approvePlan: 'plan-2222222222-b2b2b2b2b2'\n",
		},
		{
			name:    "already approved",
			in:      "apiVersion: infra.landform.dev/v1alpha1\nkind: Terraform\nmetadata:\n  name: database\nspec:\n  approvePlan: plan-2222222222-b2b2b2b2b2\n",
			want:    "apiVersion: infra.landform.dev/v1alpha1\nkind: Terraform\nmetadata:\n  name: database\nspec:\n  approvePlan: plan-2222222222-b2b2b2b2b2\n",
			already: true,
		},
		{
			name: "auto",
			in:   "apiVersion: infra.landform.dev/v1alpha1\nkind: Terraform\nmetadata:\n  name: database\nspec:\n  approvePlan: auto\n",
			err:  errApprovesAuto.Error(),
		},
		{
			name: "other namespace",
			in:   "apiVersion: infra.landform.dev/v1alpha1\nkind: Terraform\nmetadata:\n  name: database\n  namespace: team-b\nspec:\n  path: ./m\n",
			err:  "it holds no Terraform object team-a/database, only team-b/database",
		},
		{
			name: "tofu-controller's Terraform",
			in:   "apiVersion: infra.contrib.fluxcd.io/v1alpha2\nkind: Terraform\nmetadata:\n  name: database\nspec:\n  path: ./m\n",
			err:  "it holds no Terraform object (infra.landform.dev)",
		},
		{
			name: "flow spec",
			in:   "apiVersion: infra.landform.dev/v1alpha1\nkind: Terraform\nmetadata:\n  name: database\nspec: {path: ./m}\n",
			err:  "its spec is not a block mapping: set spec.approvePlan by hand",
		},
		{
			name: "block scalar",
			in:   "apiVersion: infra.landform.dev/v1alpha1\nkind: Terraform\nmetadata:\n  name: database\nspec:\n  approvePlan: >-\n    plan-1\n",
			err:  "its spec.approvePlan is written in a way this command does not edit: set it by hand",
		},
		{
			name: "not YAML",
			in:   "kind: [",
			err:  "it is not valid YAML: yaml: line 1: did not find expected node content",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, already, err := setApprovePlan([]byte(tt.in), "team-a", "database", id)
			switch {
			case tt.err != "":
				if err == nil || err.Error() != tt.err && !errors.Is(err, errApprovesAuto) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("edited file differs (-want +got):\n%s", diff)
			}
			if already != tt.already {
				t.Errorf("already = %v, want %v", already, tt.already)
			}
		})
	}
}
