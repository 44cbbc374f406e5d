package server

import (
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
