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
		// OpenTofu copies the input to the output without its mark.
		{"unmarked copy before", "plan", none, []string{"resource_changes", db, "change", "before", "output", "password"}, SensitiveValue},
		{"unmarked copy in the prior state", "plan", none, []string{"prior_state", "values", "root_module", "resources", db, "values", "output", "password"}, SensitiveValue},
		{"unmarked copy, plain beside it", "plan", none, []string{"prior_state", "values", "root_module", "resources", db, "values", "output", "engine"}, "postgres15"},
		{"drift output before", "drift", none, []string{"resource_drift", db, "change", "before", "output", "password"}, SensitiveValue},
		{"drift output after", "drift", none, []string{"resource_drift", db, "change", "after", "output", "password"}, SensitiveValue},
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

// No sensitive value of the fixtures is left anywhere in Redact's result.
func TestRedactHidesSensitiveValues(t *testing.T) {
	for _, name := range []string{"plan", "drift"} {
		t.Run(name, func(t *testing.T) {
			data := fixture(t, name)
			doc, err := Redact(data, none)
			if err != nil {
				t.Fatal(err)
			}
			out, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			for _, secret := range fixtureSecrets(t, name, data) {
				if strings.Contains(string(out), secret) {
					t.Errorf("the redacted plan shows %q", secret)
				}
			}
		})
	}
}

// fixtureSecrets are the passwords of fixture name (data), which must
// still hold them for a test that looks for them to mean anything.
func fixtureSecrets(t *testing.T, name string, data []byte) []string {
	t.Helper()
	secrets := []string{"hunter2", "s3cr3t-new"}
	if name == "drift" {
		secrets = append(secrets, "changed-outside")
	}
	for _, s := range secrets {
		if !strings.Contains(string(data), s) {
			t.Fatalf("the %s fixture no longer holds %q", name, s)
		}
	}
	return secrets
}

// A value sensitive in one place is masked where it is copied without a
// mark: whole, inside longer strings, as a number; object keys are left,
// and so are values shorter than minSecret and booleans.
func TestRedactUnmarkedCopies(t *testing.T) {
	const plan = `{"resource_changes":[
{"address":"x.marked","change":{"actions":["create"],"before":null,
 "after":{"pw":"hunter2","pin":12345,"short":"abc","port":80,"on":true},
 "before_sensitive":false,"after_sensitive":{"pw":true,"pin":true,"short":true,"port":true,"on":true}}},
{"address":"x.copy","change":{"actions":["create"],"before":null,
 "after":{"pw":"hunter2","dsn":"postgres://admin:hunter2@db/hunter2","pin":12345,"pin_text":"pin 12345",
  "short":"abc","with_short":"abcdef","port":80,"on":true,"list":["hunter2",["x hunter2"]],"hunter2":"key"},
 "before_sensitive":false,"after_sensitive":{}}}]}`
	doc, err := Redact([]byte(plan), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(at(t, doc, "resource_changes", "@x.copy", "change", "after"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"dsn":"postgres://admin:(sensitive value)@db/(sensitive value)","hunter2":"key",` +
		`"list":["(sensitive value)",["x (sensitive value)"]],"on":true,"pin":"(sensitive value)",` +
		`"pin_text":"pin (sensitive value)","port":80,"pw":"(sensitive value)","short":"abc","with_short":"abcdef"}`
	if string(got) != want {
		t.Errorf("copy after =\n%s\nwant\n%s", got, want)
	}
}

func TestCutSecrets(t *testing.T) {
	for _, tt := range []struct {
		name    string
		s       string
		secrets []string
		want    string
	}{
		{"none", "postgres://db", []string{"hunter2"}, "postgres://db"},
		{"whole", "hunter2", []string{"hunter2"}, SensitiveValue},
		{"inside", "postgres://admin:hunter2@db", []string{"hunter2"}, "postgres://admin:(sensitive value)@db"},
		{"each occurrence", "hunter2/hunter2", []string{"hunter2"}, "(sensitive value)/(sensitive value)"},
		{"back to back", "hunter2hunter2", []string{"hunter2"}, "(sensitive value)(sensitive value)"},
		{"inside a longer secret", "u=admin:hunter2;", []string{"hunter2", "admin:hunter2"}, "u=(sensitive value);"},
		{"overlapping", "xx-1234-abcd-yy", []string{"xx-1234-ab", "34-abcd-yy"}, SensitiveValue},
	} {
		t.Run(tt.name, func(t *testing.T) {
			secrets := map[string]bool{}
			for _, s := range tt.secrets {
				secrets[s] = true
			}
			if got := cutSecrets(tt.s, secrets); got != tt.want {
				t.Errorf("cutSecrets(%q) = %q, want %q", tt.s, got, tt.want)
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

// TestRedactText: terraform's own text prints the copy of a secret whose
// mark the engine dropped (as the real plan.json's prior output does);
// the text is masked with what the JSON plan holds as sensitive.
func TestRedactText(t *testing.T) {
	text := []byte(`  # terraform_data.database must be replaced
-/+ resource "terraform_data" "database" {
      ~ output = {
          - password = "hunter2"
          - engine   = "postgres15"
        }
    }
`)
	got, err := RedactText(text, fixture(t, "plan"), none)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got), "hunter2") || !strings.Contains(string(got), `- password = "(sensitive value)"`) {
		t.Errorf("the text keeps the secret:\n%s", got)
	}
	if !strings.Contains(string(got), `"postgres15"`) {
		t.Errorf("a plain value was masked:\n%s", got)
	}
	if _, err := RedactText(text, []byte("not json"), none); err == nil {
		t.Error("a JSON plan that cannot be read let the text through")
	}
}
