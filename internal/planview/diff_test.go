package planview

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	tfjson "github.com/hashicorp/terraform-json"
)

func actions(as ...string) tfjson.Actions {
	var a tfjson.Actions
	for _, s := range as {
		a = append(a, tfjson.Action(s))
	}
	return a
}

// diff runs Diff on a fixture and returns the changes, or the drift.
func diff(t *testing.T, fixtureName string, drift bool) []Resource {
	t.Helper()
	changes, drifted, err := Diff(fixture(t, fixtureName), none)
	if err != nil {
		t.Fatal(err)
	}
	if drift {
		return drifted
	}
	return changes
}

// ids are the ids of the fixture's prior state, by address: they differ
// each time make-fixtures.sh runs.
func ids(t *testing.T, fixtureName string) map[string]string {
	t.Helper()
	var p tfjson.Plan
	if err := json.Unmarshal(fixture(t, fixtureName), &p); err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, r := range p.PriorState.Values.RootModule.Resources {
		id, _ := r.AttributeValues["id"].(string)
		m[r.Address] = `"` + id + `"`
	}
	return m
}

func TestDiffOrder(t *testing.T) {
	for _, tt := range []struct {
		name    string
		fixture string
		drift   bool
		want    []string
	}{
		{"changes", "plan", false, []string{
			"-/+ terraform_data.database (replace)",
			"- terraform_data.old",
			"+ terraform_data.cache",
			"+ terraform_data.many",
			"~ terraform_data.imported (import)",
			"~ terraform_data.network",
			"<- terraform_data.adopted (import)",
		}},
		{"no drift", "plan", true, nil},
		{"drift", "drift", true, []string{
			"- terraform_data.old",
			"~ terraform_data.database",
			"~ terraform_data.network",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, r := range diff(t, tt.fixture, tt.drift) {
				got = append(got, r.Symbol+" "+r.Address+r.Note)
				c := Change{Address: r.Address, Actions: r.Actions, Import: r.Import, Deposed: r.Deposed}
				if r.Destructive != c.Destructive() {
					t.Errorf("%s: Destructive %v", r.Address, r.Destructive)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDiffAttributes(t *testing.T) {
	const (
		unknown   = KnownAfterApply
		sensitive = SensitiveValue
	)
	id := ids(t, "plan")
	driftID := ids(t, "drift")
	adopted := adoptedID(t)
	for _, tt := range []struct {
		name    string
		fixture string
		drift   bool
		address string
		want    []Attribute
	}{
		{"update: only what changes, nested and listed", "plan", false, "terraform_data.network", []Attribute{
			{Path: "input.mtu", After: "12345678901234567890", Changed: true}, // exact
			{Path: "input.subnets[0].zone", Before: `"a"`, After: `"c"`, Changed: true},
			{Path: "input.subnets[2].cidr", After: `"10.0.3.0/24"`, Changed: true},
			{Path: "input.subnets[2].zone", After: `"<a&b>"`, Changed: true},
			{Path: "input.tags.Env", Before: `"dev"`, After: `"prod"`, Changed: true},
			{Path: `input.tags["kubernetes.io/role"]`, After: `"net"`, Changed: true},
			// output is unknown as a whole: every leaf it had is.
			{Path: "output.cidr", Before: `"10.0.0.0/16"`, After: unknown, Changed: true},
			{Path: "output.name", Before: `"main"`, After: unknown, Changed: true},
			{Path: "output.subnets[0].cidr", Before: `"10.0.1.0/24"`, After: unknown, Changed: true},
			{Path: "output.subnets[0].zone", Before: `"a"`, After: unknown, Changed: true},
			{Path: "output.subnets[1].cidr", Before: `"10.0.2.0/24"`, After: unknown, Changed: true},
			{Path: "output.subnets[1].zone", Before: `"b"`, After: unknown, Changed: true},
			{Path: "output.tags.Env", Before: `"dev"`, After: unknown, Changed: true},
			{Path: "output.tags.Name", Before: `"main"`, After: unknown, Changed: true},
		}},
		{"replace: the path that forces it, a sensitive value that changes", "plan", false, "terraform_data.database", []Attribute{
			{Path: "id", Before: id["terraform_data.database"], After: unknown, Changed: true},
			{Path: "input.engine", Before: `"postgres15"`, After: `"postgres16"`, Changed: true},
			{Path: "input.password", Before: sensitive, After: sensitive, Changed: true},
			{Path: "input.size", Before: "10", After: "20", Changed: true},
			{Path: "output.engine", Before: `"postgres15"`, After: unknown, Changed: true},
			// OpenTofu does not mark the prior output of a
			// terraform_data fed a sensitive input: the value is
			// masked as the marked input's copy.
			{Path: "output.password", Before: sensitive, After: unknown, Changed: true},
			{Path: "output.ports[0]", Before: "5432", After: unknown, Changed: true},
			{Path: "output.size", Before: "10", After: unknown, Changed: true},
			{Path: "triggers_replace", Before: `"postgres15"`, After: `"postgres16"`, ForcesReplacement: true, Changed: true},
		}},
		{"create: every leaf but nulls, unknown ones and empty lists", "plan", false, "terraform_data.cache", []Attribute{
			{Path: "id", After: unknown, Changed: true},
			{Path: "input.db", After: unknown, Changed: true},
			{Path: "input.empty", After: "[]", Changed: true},
			{Path: "input.name", After: `"cache"`, Changed: true},
			{Path: "input.sizes[0]", After: "1", Changed: true},
			{Path: "input.sizes[1]", After: "2.5", Changed: true},
			{Path: "output", After: unknown, Changed: true},
		}},
		{"delete: every leaf before", "plan", false, "terraform_data.old", []Attribute{
			{Path: "id", Before: id["terraform_data.old"], Changed: true},
			{Path: "input.count", Before: "3", Changed: true},
			{Path: "input.note", Before: `"gone soon"`, Changed: true},
			{Path: "output.count", Before: "3", Changed: true},
			{Path: "output.note", Before: `"gone soon"`, Changed: true},
		}},
		{"import that updates", "plan", false, "terraform_data.imported", []Attribute{
			{Path: "input", Before: "null", After: `"kept"`, Changed: true},
			{Path: "output", Before: "null", After: unknown, Changed: true},
		}},
		{"import that changes nothing: what it adopts", "plan", false, "terraform_data.adopted", []Attribute{
			{Path: "id", Before: adopted, After: adopted},
		}},
		{"drift with a sensitive value", "drift", true, "terraform_data.database", []Attribute{
			{Path: "input.password", Before: sensitive, After: sensitive, Changed: true},
			{Path: "input.size", Before: "10", After: "12", Changed: true},
			{Path: "output.password", Before: sensitive, After: sensitive, Changed: true},
			{Path: "output.size", Before: "10", After: "12", Changed: true},
		}},
		{"drift", "drift", true, "terraform_data.network", []Attribute{
			{Path: "input.tags.Env", Before: `"dev"`, After: `"staging"`, Changed: true},
			{Path: "output.tags.Env", Before: `"dev"`, After: `"staging"`, Changed: true},
		}},
		{"drift delete", "drift", true, "terraform_data.old", []Attribute{
			{Path: "id", Before: driftID["terraform_data.old"], Changed: true},
			{Path: "input.count", Before: "3", Changed: true},
			{Path: "input.note", Before: `"gone soon"`, Changed: true},
			{Path: "output.count", Before: "3", Changed: true},
			{Path: "output.note", Before: `"gone soon"`, Changed: true},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := find(t, diff(t, tt.fixture, tt.drift), tt.address)
			if diff := cmp.Diff(tt.want, r.Attributes); diff != "" {
				t.Errorf("attributes (-want +got):\n%s", diff)
			}
		})
	}
}

func find(t *testing.T, rs []Resource, address string) Resource {
	t.Helper()
	for _, r := range rs {
		if r.Address == address {
			return r
		}
	}
	t.Fatalf("%s: not in the diff", address)
	return Resource{}
}

// adoptedID is the id terraform_data.adopted is imported with: it is
// not in the prior state.
func adoptedID(t *testing.T) string {
	t.Helper()
	doc, err := Redact(fixture(t, "plan"), none)
	if err != nil {
		t.Fatal(err)
	}
	return `"` + at(t, doc, "resource_changes", "@terraform_data.adopted", "change", "importing", "id").(string) + `"`
}

// A resource of 205 list elements lists 200 attributes and counts the
// rest.
func TestDiffCap(t *testing.T) {
	attrs := find(t, diff(t, "plan", false), "terraform_data.many").Attributes
	if len(attrs) != maxAttributes+1 {
		t.Fatalf("%d attributes, want %d", len(attrs), maxAttributes+1)
	}
	if diff := cmp.Diff(Attribute{Path: "input[198]", After: "198", Changed: true}, attrs[maxAttributes-1]); diff != "" {
		t.Errorf("last listed (-want +got):\n%s", diff)
	}
	// input[199] to input[204], and output.
	if diff := cmp.Diff(Attribute{Path: "…", After: "7 more attributes", Changed: true}, attrs[maxAttributes]); diff != "" {
		t.Errorf("the count of the rest (-want +got):\n%s", diff)
	}
}

// No sensitive value of the fixtures reaches Diff's result, in any field.
func TestDiffHidesSensitiveValues(t *testing.T) {
	for _, name := range []string{"plan", "drift"} {
		t.Run(name, func(t *testing.T) {
			data := fixture(t, name)
			changes, drift, err := Diff(data, none)
			if err != nil {
				t.Fatal(err)
			}
			out, err := json.Marshal([][]Resource{changes, drift})
			if err != nil {
				t.Fatal(err)
			}
			// hunter2 is also where the engine wrote it unmarked
			// (terraform_data's prior output).
			for _, secret := range fixtureSecrets(t, name, data) {
				if strings.Contains(string(out), secret) {
					t.Errorf("the diff shows %q", secret)
				}
			}
		})
	}
}

// synthetic holds what the offline engine does not make: a read, a
// forget, a create-before-destroy forced by a list element, its deposed
// object, whole objects marked sensitive, an unknown list element.
const synthetic = `{"format_version":"1.2","terraform_version":"1.12.6","resource_changes":[
{"address":"data.x.y","mode":"data","change":{"actions":["read"],"before":null,"after":{"k":"v"},"after_unknown":{"id":true}}},
{"address":"x.forgot","change":{"actions":["forget"],"before":{"a":1},"after":null,"after_unknown":{}}},
{"address":"x.cbd","change":{"actions":["create","delete"],"before":{"rules":[{"port":80},{"port":443}]},"after":{"rules":[{"port":80},{"port":8443}]},"after_unknown":{},"replace_paths":[["rules",1,"port"]]}},
{"address":"x.cbd","deposed":"00000001","change":{"actions":["delete"],"before":{"rules":[]},"after":null,"after_unknown":{}}},
{"address":"x.secret","change":{"actions":["update"],"before":{"conf":{"k":"old-secret"},"n":1},"after":{"conf":{"k":"new-secret"},"n":1},"after_unknown":{},"before_sensitive":{"conf":true},"after_sensitive":{"conf":true}}},
{"address":"x.same","change":{"actions":["update"],"before":{"conf":{"k":"same-secret"},"n":1},"after":{"conf":{"k":"same-secret"},"n":2},"after_unknown":{},"before_sensitive":{"conf":true},"after_sensitive":{"conf":true}}},
{"address":"x.list","change":{"actions":["create"],"before":null,"after":{"l":["a",null]},"after_unknown":{"l":[false,true]}}},
{"address":"x.nothing","change":{"actions":["no-op"],"before":{"a":1},"after":{"a":1},"after_unknown":{}}}
]}`

func TestDiffSynthetic(t *testing.T) {
	changes, _, err := Diff([]byte(synthetic), nil)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Change     string
		Attributes []Attribute
	}
	var got []row
	for _, r := range changes {
		got = append(got, row{r.Symbol + " " + r.Address + r.Note, r.Attributes})
	}
	want := []row{
		{"+/- x.cbd (replace)", []Attribute{{Path: "rules[1].port", Before: "443", After: "8443", ForcesReplacement: true, Changed: true}}},
		{"- x.cbd (deposed object)", []Attribute{{Path: "rules", Before: "[]", Changed: true}}},
		{". x.forgot (forget: removed from the state, kept in the cloud)", []Attribute{{Path: "a", Before: "1", Changed: true}}},
		{"+ x.list", []Attribute{{Path: "l[0]", After: `"a"`, Changed: true}, {Path: "l[1]", After: KnownAfterApply, Changed: true}}},
		// The whole object stays masked; that it changes is kept.
		{"~ x.same", []Attribute{{Path: "n", Before: "1", After: "2", Changed: true}}},
		{"~ x.secret", []Attribute{{Path: "conf", Before: SensitiveValue, After: SensitiveValue, Changed: true}}},
		{"<= data.x.y", []Attribute{{Path: "id", After: KnownAfterApply, Changed: true}, {Path: "k", After: `"v"`, Changed: true}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("diff (-want +got):\n%s", diff)
	}
	out, _ := json.Marshal(changes)
	if strings.Contains(string(out), "-secret") {
		t.Errorf("the diff shows a masked value: %s", out)
	}
}

// A secret the engine copied without its mark, inside a longer string,
// changes: the diff says so, and shows neither value.
func TestDiffUnmarkedCopy(t *testing.T) {
	const plan = `{"resource_changes":[{"address":"x.db","change":{"actions":["update"],
 "before":{"password":"old-secret","url":"postgres://admin:old-secret@db"},
 "after":{"password":"new-secret","url":"postgres://admin:new-secret@db"},
 "after_unknown":{},"before_sensitive":{"password":true},"after_sensitive":{"password":true}}}]}`
	changes, _, err := Diff([]byte(plan), nil)
	if err != nil {
		t.Fatal(err)
	}
	masked := `"postgres://admin:(sensitive value)@db"`
	want := []Attribute{
		{Path: "password", Before: SensitiveValue, After: SensitiveValue, Changed: true},
		{Path: "url", Before: masked, After: masked, Changed: true},
	}
	if diff := cmp.Diff(want, find(t, changes, "x.db").Attributes); diff != "" {
		t.Errorf("attributes (-want +got):\n%s", diff)
	}
}

func TestDiffNotJSON(t *testing.T) {
	if _, _, err := Diff([]byte("Plan: 1 to add"), nil); err == nil {
		t.Error("Diff of a human plan: no error")
	}
}
