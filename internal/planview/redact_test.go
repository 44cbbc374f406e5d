package planview

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// plain stands for a value that is there and not masked.
type plain struct{}

// TestRedact checks which values of the real fixture plans are hidden.
func TestRedact(t *testing.T) {
	const db = "@terraform_data.database"
	for _, tt := range []struct {
		name      string
		fixture   string
		secretVar func(string) bool
		path      []string
		want      any
	}{
		{"sensitive variable", "plan", none, []string{"variables", "password", "value"}, SensitiveValue},
		{"plain variable", "plan", none, []string{"variables", "engine", "value"}, "postgres16"},
		{"variable from a Secret", "plan", only("engine"), []string{"variables", "engine", "value"}, SensitiveValue},
		{"no secretVar", "plan", nil, []string{"variables", "engine", "value"}, "postgres16"},
		{"marked attribute after", "plan", none, []string{"resource_changes", db, "change", "after", "input", "password"}, SensitiveValue},
		{"marked attribute before", "plan", none, []string{"resource_changes", db, "change", "before", "input", "password"}, SensitiveValue},
		{"unmarked attribute", "plan", none, []string{"resource_changes", db, "change", "after", "input", "size"}, json.Number("20")},
		{"marked drift", "drift", none, []string{"resource_drift", db, "change", "after", "input", "password"}, SensitiveValue},
		{"sensitive output change", "plan", none, []string{"output_changes", "dsn", "after"}, SensitiveValue},
		{"sensitive output change before", "plan", none, []string{"output_changes", "dsn", "before"}, SensitiveValue},
		{"plain output change", "plan", none, []string{"output_changes", "network_id", "before"}, plain{}},
		{"planned sensitive output", "plan", none, []string{"planned_values", "outputs", "dsn", "value"}, SensitiveValue},
		{"planned marked value", "plan", none, []string{"planned_values", "root_module", "resources", db, "values", "input", "password"}, SensitiveValue},
		{"prior sensitive output", "plan", none, []string{"prior_state", "values", "outputs", "dsn", "value"}, SensitiveValue},
		{"prior plain output", "plan", none, []string{"prior_state", "values", "outputs", "network_id", "value"}, plain{}},
		{"prior marked value", "plan", none, []string{"prior_state", "values", "root_module", "resources", db, "values", "input", "password"}, SensitiveValue},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := Redact(fixture(t, tt.fixture), tt.secretVar)
			if err != nil {
				t.Fatal(err)
			}
			got := at(t, doc, tt.path...)
			if _, ok := tt.want.(plain); ok {
				if got == nil || got == SensitiveValue {
					t.Errorf("%s = %v, want a plain value", strings.Join(tt.path, "."), got)
				}
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
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

// at walks doc along path: map keys, list indexes as digits, or
// "@address" for the list element of that address.
func at(t *testing.T, doc any, path ...string) any {
	t.Helper()
	for _, p := range path {
		switch v := doc.(type) {
		case map[string]any:
			doc = v[p]
		case []any:
			doc = nil
			for i, e := range v {
				if addr, ok := strings.CutPrefix(p, "@"); ok && asMap(e)["address"] == addr || p == strconv.Itoa(i) {
					doc = e
					break
				}
			}
			if doc == nil {
				t.Fatalf("%s: no such element", p)
			}
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
			fromSecret := SecretVariables(&tt.spec)
			for name, want := range tt.want {
				if got := fromSecret(name); got != want {
					t.Errorf("variable %s from a Secret = %v, want %v", name, got, want)
				}
			}
		})
	}
}
