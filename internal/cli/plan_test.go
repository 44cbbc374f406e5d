package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/planstore"
)

func TestPlanShow(t *testing.T) {
	ns := namespace(t, "plan")
	objs := fixtureStates(t, ns, "plan")
	storePlan(t, objs[objPending], pendingPlan, rev2, false)
	storePlan(t, objs[objReady], appliedPlan, rev1, true)
	storePlan(t, terraform(t, ns, "destructive", heldDestructive), pendingPlan, rev2, false)
	// The status names a plan other than the stored one (a save under way).
	storePlan(t, objs[objLocked], "plan-3333333333-c3c3c3c3c3", rev2, false)
	stale := objs[objLocked]
	pending(stale)
	if err := env.Client.Status().Update(t.Context(), stale); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		golden string
		args   []string
	}{
		{"plan/pending", []string{"plan", "show", "-n", ns, objPending}},
		{"plan/pending-json", []string{"plan", "show", "-n", ns, objPending, "--json"}},
		{"plan/destructive", []string{"plan", "show", "-n", ns, "destructive"}},
		{"plan/applied", []string{"plan", "show", "-n", ns, objReady}},
		{"plan/no-plan", []string{"plan", "show", "-n", ns, objNew}},
		{"plan/stale", []string{"plan", "show", "-n", ns, objLocked}},
		{"plan/not-found", []string{"plan", "show", "-n", ns, "missing"}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			r := run(t, "", tt.args...)
			golden(t, tt.golden, r.transcript())
			if strings.Contains(r.stdout, "s3cr3t-new") {
				t.Errorf("the output shows the sensitive password")
			}
		})
	}
}

// A plan that imports says so before terraform's text: its counts and
// every address it imports.
func TestPlanShowImports(t *testing.T) {
	ns := namespace(t, "plan-import")
	obj := terraform(t, ns, "import", func(obj *v1alpha1.Terraform) {
		obj.Spec.Imports = []v1alpha1.Import{{To: "landform_database.main", ID: "db-ac53ede328"}, {To: "landform_security_group.web", ID: "sg-7684c44467"}}
		pending(obj)
		obj.Status.Plan.Add, obj.Status.Plan.Change, obj.Status.Plan.Destroy, obj.Status.Plan.Replace = 1, 1, 0, 0
		obj.Status.Plan.Import = 2
		obj.Status.Plan.Resources = []string{"landform_database.main", "landform_security_group.web", "terraform_data.tag"}
		obj.Status.Plan.ResourcesToImport = []string{"landform_database.main", "landform_security_group.web"}
		obj.Status.Plan.ResourcesToReplace, obj.Status.Plan.ResourcesToDestroy = nil, nil
	})
	jsonPlan, humanPlan := readFixturePlan(t, "import-plan")
	p := &planstore.Plan{ID: pendingPlan, Revision: rev2, InputsDigest: "inputs", PlanFile: []byte("binary plan"), JSONPlan: jsonPlan, HumanPlan: humanPlan}
	if err := (planstore.Store{Client: env.Client}).Save(t.Context(), obj, p); err != nil {
		t.Fatal(err)
	}
	golden(t, "plan/import", run(t, "", "plan", "show", "-n", ns, "import").transcript())
}

// TestRedactPlan checks which values of the real fixture plan are hidden.
func TestRedactPlan(t *testing.T) {
	jsonPlan, _ := fixturePlan(t)
	for _, tt := range []struct {
		name      string
		secretVar func(string) bool
		path      []string
		want      any
	}{
		{"sensitive variable", none, []string{"variables", "password", "value"}, sensitiveValue},
		{"plain variable", none, []string{"variables", "size", "value"}, "40"},
		{"variable from a Secret", only("size"), []string{"variables", "size", "value"}, sensitiveValue},
		{"marked attribute after", none, []string{"resource_changes", "1", "change", "after", "input", "password"}, sensitiveValue},
		{"marked attribute before", none, []string{"resource_changes", "1", "change", "before", "input", "password"}, sensitiveValue},
		{"unmarked attribute", none, []string{"resource_changes", "1", "change", "after", "input", "size"}, json.Number("40")},
		{"sensitive output change", none, []string{"output_changes", "dsn", "after"}, sensitiveValue},
		{"sensitive output change before", none, []string{"output_changes", "dsn", "before"}, sensitiveValue},
		{"plain output change", none, []string{"output_changes", "security_group_id", "before"}, "sg-20"},
		{"planned sensitive output", none, []string{"planned_values", "outputs", "dsn", "value"}, sensitiveValue},
		{"planned marked value", none, []string{"planned_values", "root_module", "resources", "1", "values", "input", "password"}, sensitiveValue},
		{"prior sensitive output", none, []string{"prior_state", "values", "outputs", "dsn", "value"}, sensitiveValue},
		{"prior plain output", none, []string{"prior_state", "values", "outputs", "security_group_id", "value"}, "sg-20"},
		{"prior marked value", none, []string{"prior_state", "values", "root_module", "resources", "0", "values", "input", "password"}, sensitiveValue},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := redactPlan(jsonPlan, tt.secretVar)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, at(t, doc, tt.path...)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", strings.Join(tt.path, "."), diff)
			}
		})
	}
}

func none(string) bool { return false }

func only(names ...string) func(string) bool {
	return func(n string) bool {
		for _, x := range names {
			if x == n {
				return true
			}
		}
		return false
	}
}

// at walks doc along path (map keys, or list indexes as digits).
func at(t *testing.T, doc any, path ...string) any {
	t.Helper()
	for _, p := range path {
		switch v := doc.(type) {
		case map[string]any:
			doc = v[p]
		case []any:
			i := 0
			for _, c := range p {
				i = i*10 + int(c-'0')
			}
			if i >= len(v) {
				t.Fatalf("%s: index out of range", p)
			}
			doc = v[i]
		default:
			t.Fatalf("%s: cannot descend into %T", p, doc)
		}
	}
	return doc
}

func TestMask(t *testing.T) {
	for _, tt := range []struct {
		name         string
		value, marks string
		want         string
	}{
		{"whole", `{"a":1}`, `true`, `"(sensitive value)"`},
		{"not marked", `{"a":1}`, `false`, `{"a":1}`},
		{"nested key", `{"a":{"b":"x","c":"y"}}`, `{"a":{"b":true}}`, `{"a":{"b":"(sensitive value)","c":"y"}}`},
		{"list element", `["x","y","z"]`, `[false,true]`, `["x","(sensitive value)","z"]`},
		{"null stays null", `{"a":null}`, `{"a":true}`, `{"a":null}`},
		{"marks for a missing key", `{"a":1}`, `{"b":true}`, `{"a":1}`},
		{"shape mismatch", `"x"`, `{"a":true}`, `"x"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var v, marks any
			if err := json.Unmarshal([]byte(tt.value), &v); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tt.marks), &marks); err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(mask(v, marks))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("mask(%s, %s) = %s, want %s", tt.value, tt.marks, got, tt.want)
			}
		})
	}
}

func TestSecretVariables(t *testing.T) {
	for _, tt := range []struct {
		name string
		spec v1alpha1.TerraformSpec
		want map[string]bool
	}{
		{"none", v1alpha1.TerraformSpec{}, map[string]bool{"a": false}},
		{"selected Secret keys, renamed", v1alpha1.TerraformSpec{VarsFrom: []v1alpha1.VarsReference{
			{Kind: "Secret", Name: "s", VarsKeys: []string{"pw:admin_password", "token"}},
		}}, map[string]bool{"admin_password": true, "token": true, "pw": false, "size": false}},
		{"a later ConfigMap key overrides", v1alpha1.TerraformSpec{VarsFrom: []v1alpha1.VarsReference{
			{Kind: "Secret", Name: "s", VarsKeys: []string{"token"}},
			{Kind: "ConfigMap", Name: "c", VarsKeys: []string{"token"}},
		}}, map[string]bool{"token": false}},
		{"a whole Secret", v1alpha1.TerraformSpec{
			VarsFrom: []v1alpha1.VarsReference{{Kind: "Secret", Name: "s"}},
			Vars:     []v1alpha1.Variable{{Name: "size"}},
		}, map[string]bool{"anything": true, "size": false}},
		{"spec.vars override", v1alpha1.TerraformSpec{
			VarsFrom: []v1alpha1.VarsReference{{Kind: "Secret", Name: "s", VarsKeys: []string{"size"}}},
			Vars:     []v1alpha1.Variable{{Name: "size"}},
		}, map[string]bool{"size": false}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fromSecret := secretVariables(&tt.spec)
			for name, want := range tt.want {
				if got := fromSecret(name); got != want {
					t.Errorf("variable %s from a Secret = %v, want %v", name, got, want)
				}
			}
		})
	}
}

func TestReadPlanJSON(t *testing.T) {
	for _, tt := range []struct {
		fixture string
		changes []string
		imports []string
	}{
		{fixture: "plan", changes: []string{
			"+ terraform_data.cache",
			"-/+ terraform_data.database (replace)",
			"- terraform_data.old",
			"~ terraform_data.security_group",
		}},
		// An import that changes nothing is listed too.
		{fixture: "import-plan", changes: []string{
			"~ landform_database.main (import)",
			"<- landform_security_group.web (import)",
			"+ terraform_data.tag",
		}, imports: []string{"landform_database.main", "landform_security_group.web"}},
	} {
		t.Run(tt.fixture, func(t *testing.T) {
			jsonPlan, _ := readFixturePlan(t, tt.fixture)
			d, err := readPlanJSON(jsonPlan)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range d.Changes {
				got = append(got, c.symbol()+" "+c.Address+c.note())
			}
			if diff := cmp.Diff(tt.changes, got); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.imports, d.imports()); diff != "" {
				t.Errorf("imports (-want +got):\n%s", diff)
			}
			if d.Engine != "1.12.6" {
				t.Errorf("engine %q, want 1.12.6", d.Engine)
			}
		})
	}
	jsonPlan, _ := fixturePlan(t)
	d, err := readPlanJSON(jsonPlan)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]bool{"dsn": true, "security_group_id": false, "cache": false}, d.Sensitive); diff != "" {
		t.Errorf("output sensitivity (-want +got):\n%s", diff)
	}
}
