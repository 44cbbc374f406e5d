package server

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const planFixture = `{
  "format_version": "1.2",
  "resource_changes": [
    {"address": "b.replaced", "change": {"actions": ["delete", "create"], "before": {"id": "1", "n": 1}, "after": {"n": 2}, "after_unknown": {"id": true}}},
    {"address": "a.created", "change": {"actions": ["create"], "before": null, "after": {"x": "y"}, "after_unknown": {"id": true}}},
    {"address": "c.updated", "change": {"actions": ["update"], "before": {"v": 1}, "after": {"v": 2}, "after_unknown": {}}},
    {"address": "d.deleted", "change": {"actions": ["delete"], "before": {"v": 1}, "after": null, "after_unknown": {}}},
    {"address": "e.unchanged", "change": {"actions": ["no-op"], "before": {"v": 1}, "after": {"v": 1}, "after_unknown": {}}},
    {"address": "data.f.read", "change": {"actions": ["read"], "before": null, "after": {}, "after_unknown": {}}},
    {"address": "g.cbd", "change": {"actions": ["create", "delete"], "before": {}, "after": {}, "after_unknown": {}}}
  ],
  "output_changes": {
    "out": {"actions": ["create"], "before": null, "after": "v", "after_unknown": false},
    "same": {"actions": ["no-op"], "before": "s", "after": "s", "after_unknown": false}
  },
  "timestamp": "2026-01-01T00:00:00Z"
}`

// The same changes, in another order, other whitespace and key order, and
// another timestamp and no-op entries: the digest must not move.
const planFixtureReordered = `{"timestamp":"2027-01-01T00:00:00Z","output_changes":{"out":{"after_unknown":false,"after":"v","before":null,"actions":["create"]}},
"resource_changes":[
 {"address":"g.cbd","change":{"actions":["create","delete"],"before":{},"after":{},"after_unknown":{}}},
 {"address":"d.deleted","change":{"actions":["delete"],"before":{"v":1},"after":null,"after_unknown":{}}},
 {"address":"c.updated","change":{"actions":["update"],"before":{"v":1},"after":{"v":2},"after_unknown":{}}},
 {"address":"a.created","change":{"actions":["create"],"before":null,"after":{"x":"y"},"after_unknown":{"id":true}}},
 {"address":"b.replaced","change":{"actions":["delete","create"],"before":{"n":1,"id":"1"},"after":{"n":2},"after_unknown":{"id":true}}}
]}`

func TestSummarizePlan(t *testing.T) {
	res, err := summarizePlan([]byte(planFixture))
	if err != nil {
		t.Fatal(err)
	}
	// Replacements count as an add and a destroy, like terraform's summary.
	if res.Add != 3 || res.Change != 1 || res.Destroy != 3 {
		t.Fatalf("counts add=%d change=%d destroy=%d", res.Add, res.Change, res.Destroy)
	}
	if diff := cmp.Diff([]string{"a.created", "b.replaced", "c.updated", "d.deleted", "g.cbd"}, res.Resources); diff != "" {
		t.Fatalf("resources (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b.replaced", "g.cbd"}, res.ResourcesToReplace); diff != "" {
		t.Fatalf("replaced (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"d.deleted"}, res.ResourcesToDestroy); diff != "" {
		t.Fatalf("destroyed (-want +got):\n%s", diff)
	}

	reordered, err := summarizePlan([]byte(planFixtureReordered))
	if err != nil {
		t.Fatal(err)
	}
	if reordered.ChangesDigest != res.ChangesDigest {
		t.Fatal("the digest depends on order, whitespace or no-op entries")
	}

	// The state digest covers the prior state, whatever its key order.
	before, err := summarizePlan([]byte(`{"prior_state":{"values":{"root_module":{}},"format_version":"1.0"}}`))
	if err != nil {
		t.Fatal(err)
	}
	same, _ := summarizePlan([]byte(`{"prior_state":{"format_version":"1.0","values":{"root_module":{}}}}`))
	after, _ := summarizePlan([]byte(`{"prior_state":{"format_version":"1.0","values":{"root_module":{"resources":[{"address":"a.b"}]}}}}`))
	if before.StateDigest == "" || before.StateDigest != same.StateDigest {
		t.Fatalf("the state digest depends on key order: %q %q", before.StateDigest, same.StateDigest)
	}
	if after.StateDigest == before.StateDigest {
		t.Fatal("another prior state, the same state digest")
	}

	for name, changed := range map[string]string{
		"another value":  `{"resource_changes":[{"address":"a.created","change":{"actions":["create"],"after":{"x":"z"}}}]}`,
		"another output": `{"output_changes":{"out":{"actions":["create"],"after":"w"}}}`,
	} {
		other, err := summarizePlan([]byte(changed))
		if err != nil {
			t.Fatal(err)
		}
		if other.ChangesDigest == res.ChangesDigest {
			t.Fatalf("%s: same digest", name)
		}
	}
}

// What destroys an object is a "delete" action, alone or in a replacement
// in either order; a "forget" keeps the object, whatever it comes with.
// The guard on destructive plans (approvePlan: auto) rests on this.
//
// A change with "importing" is an import, whatever its actions: counted
// apart, listed with the resources, and destroyed or replaced only when
// its actions say so.
func TestSummarizePlanChanges(t *testing.T) {
	cases := []struct {
		name                                     string
		changes                                  string
		add, change, destroy                     int32
		imported, replaced, destroyed, resources []string
	}{
		{name: "forget is not a destroy", changes: `{"address":"a.kept","change":{"actions":["forget"],"before":{"id":"1"},"after":null}}`,
			resources: []string{"a.kept"}},
		{name: "create then forget is not a destroy", changes: `{"address":"a.kept","change":{"actions":["create","forget"],"before":{"id":"1"},"after":{"id":"2"}}}`,
			add: 1, resources: []string{"a.kept"}},
		{name: "destroy before create", changes: `{"address":"a.db","change":{"actions":["delete","create"],"before":{"id":"1"},"after":{}}}`,
			add: 1, destroy: 1, replaced: []string{"a.db"}, resources: []string{"a.db"}},
		{name: "create before destroy", changes: `{"address":"a.db","change":{"actions":["create","delete"],"before":{"id":"1"},"after":{}}}`,
			add: 1, destroy: 1, replaced: []string{"a.db"}, resources: []string{"a.db"}},
		{name: "delete", changes: `{"address":"a.db","change":{"actions":["delete"],"before":{"id":"1"},"after":null}}`,
			destroy: 1, destroyed: []string{"a.db"}, resources: []string{"a.db"}},
		{name: "deposed object of a replaced resource, named once", changes: `{"address":"a.db","change":{"actions":["create","delete"],"before":{"id":"2"},"after":{}}},
			{"address":"a.db","deposed":"00000001","change":{"actions":["delete"],"before":{"id":"1"},"after":null}}`,
			add: 1, destroy: 2, replaced: []string{"a.db"}, resources: []string{"a.db"}},
		{name: "deposed object alone", changes: `{"address":"a.db","deposed":"00000001","change":{"actions":["delete"],"before":{"id":"1"},"after":null}}`,
			destroy: 1, destroyed: []string{"a.db"}, resources: []string{"a.db"}},
		{name: "update, create, read and no-op destroy nothing", changes: `{"address":"a.x","change":{"actions":["update"],"before":{"v":1},"after":{"v":2}}},
			{"address":"b.x","change":{"actions":["create"],"before":null,"after":{}}},
			{"address":"data.c.x","change":{"actions":["read"],"before":null,"after":{}}},
			{"address":"d.x","change":{"actions":["no-op"],"before":{},"after":{}}}`,
			add: 1, change: 1, resources: []string{"a.x", "b.x"}},
		{name: "import only", changes: `{"address":"a.db","change":{"actions":["no-op"],"before":{"id":"db-1"},"after":{"id":"db-1"},"importing":{"id":"db-1"}}}`,
			imported: []string{"a.db"}, resources: []string{"a.db"}},
		{name: "import and update", changes: `{"address":"a.db","change":{"actions":["update"],"before":{"v":1},"after":{"v":2},"importing":{"id":"db-1"}}}`,
			change: 1, imported: []string{"a.db"}, resources: []string{"a.db"}},
		{name: "import and replace", changes: `{"address":"a.db","change":{"actions":["delete","create"],"before":{"v":1},"after":{"v":2},"importing":{"id":"db-1"}}}`,
			add: 1, destroy: 1, imported: []string{"a.db"}, replaced: []string{"a.db"}, resources: []string{"a.db"}},
		{name: "imports among other changes, sorted", changes: `{"address":"module.m.b.x[\"k\"]","change":{"actions":["no-op"],"before":{},"after":{},"importing":{"id":"x"}}},
			{"address":"c.new","change":{"actions":["create"],"before":null,"after":{}}},
			{"address":"a.old","change":{"actions":["delete"],"before":{},"after":null}},
			{"address":"b.x","change":{"actions":["no-op"],"before":{},"after":{},"importing":{"id":"y"}}},
			{"address":"d.same","change":{"actions":["no-op"],"before":{},"after":{}}}`,
			add: 1, destroy: 1, imported: []string{"b.x", `module.m.b.x["k"]`}, destroyed: []string{"a.old"},
			resources: []string{"a.old", "b.x", "c.new", `module.m.b.x["k"]`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := summarizePlan([]byte(`{"resource_changes":[` + tc.changes + `]}`))
			if err != nil {
				t.Fatal(err)
			}
			if res.Add != tc.add || res.Change != tc.change || res.Destroy != tc.destroy || res.ImportCount != int32(len(tc.imported)) {
				t.Errorf("counts add=%d change=%d destroy=%d import=%d, want %d %d %d %d",
					res.Add, res.Change, res.Destroy, res.ImportCount, tc.add, tc.change, tc.destroy, len(tc.imported))
			}
			type lists struct{ Imported, Replaced, Destroyed, Resources []string }
			want := lists{tc.imported, tc.replaced, tc.destroyed, tc.resources}
			got := lists{res.ResourcesToImport, res.ResourcesToReplace, res.ResourcesToDestroy, res.Resources}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
		})
	}
}

// The digest covers the imports: an import-only plan differs from a plan
// without changes and from one importing another object, and a plan
// without imports keeps the digest it had before imports were counted
// (plan ids, and their approvals, survive the upgrade).
func TestSummarizePlanImportDigest(t *testing.T) {
	digest := func(doc string) string {
		t.Helper()
		res, err := summarizePlan([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		return res.ChangesDigest
	}
	const change = `{"resource_changes":[{"address":"a.db","change":{"actions":["no-op"],"before":{"id":"db-1"},"after":{"id":"db-1"}%s}}]}`
	none := digest(fmt.Sprintf(change, ""))
	imported := digest(fmt.Sprintf(change, `,"importing":{"id":"db-1"}`))
	other := digest(fmt.Sprintf(change, `,"importing":{"id":"db-2"}`))
	if imported == none || imported == other {
		t.Fatalf("digests: no import %s, import db-1 %s, import db-2 %s", none, imported, other)
	}
	if got := digest(planFixture); got != "bb00a84535ec69be5a5bbf8260fe5b14eda026806d6d344cf5c5c1b6d70481ff" {
		t.Fatalf("the digest of a plan without imports moved: %s", got)
	}
}
