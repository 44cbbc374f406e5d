package preview

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

const jsonPlan = `{"resource_changes":[
 {"address":"terraform_data.kept","change":{"actions":["no-op"]}},
 {"address":"data.x.y","change":{"actions":["read"]}},
 {"address":"terraform_data.new","change":{"actions":["create"]}},
 {"address":"terraform_data.changed","change":{"actions":["update"]}},
 {"address":"terraform_data.old","change":{"actions":["delete"]}},
 {"address":"terraform_data.web","change":{"actions":["delete","create"]}},
 {"address":"terraform_data.db","change":{"actions":["create","delete"]}}
]}`

// TestSummary: destroys and replacements first, addresses only, counts
// that add replacements to both sides, as terraform's own summary does.
func TestSummary(t *testing.T) {
	g := NewWithT(t)
	changes, err := Changes([]byte(jsonPlan))
	g.Expect(err).NotTo(HaveOccurred())
	s := Summary{Namespace: "previews", Name: "app-pr-7", PlanID: "plan-abc-123", Revision: "refs/pull/7/head@sha1:3f2a",
		Target: "infra/app", StateSerial: 42, TargetAppliedPlan: "plan-def-456", Changes: changes, MaxAddresses: 20}
	g.Expect(s.Markdown()).To(Equal("**Plan `plan-abc-123`** of `refs/pull/7/head@sha1:3f2a` against `infra/app` (state serial 42, after `plan-def-456`):\n" +
		"**+3 ~1 -3** (2 replaced)\n\n" +
		"| | address |\n|:-:|---|\n" +
		"| -/+ | `terraform_data.db` |\n" +
		"| -/+ | `terraform_data.web` |\n" +
		"| - | `terraform_data.old` |\n" +
		"| + | `terraform_data.new` |\n" +
		"| ~ | `terraform_data.changed` |\n" +
		"\nNothing here is applied: a merge applies through `infra/app`, which plans again and waits for its own approval.\n" +
		"The whole plan: `landform plan show app-pr-7 -n previews`\n"))
}

func TestSummaryWithoutChangesOrTarget(t *testing.T) {
	g := NewWithT(t)
	changes, err := Changes([]byte(`{"resource_changes":[{"address":"a.b","change":{"actions":["no-op"]}}]}`))
	g.Expect(err).NotTo(HaveOccurred())
	md := Summary{Namespace: "n", Name: "p", PlanID: "plan-1", Revision: "main@sha1:1", Changes: changes, MaxAddresses: 20}.Markdown()
	g.Expect(md).To(HavePrefix("**Plan `plan-1`** of `main@sha1:1` against an empty state:\n**no changes**\n"))
	g.Expect(md).NotTo(ContainSubstring("| address |"))
}

// TestSummaryBounds: an address cannot break the table or the code span,
// the list stops at MaxAddresses and at MaxMessage bytes, and says how
// many it left out.
func TestSummaryBounds(t *testing.T) {
	g := NewWithT(t)
	md := Summary{Namespace: "n", Name: "p", PlanID: "plan-1", Revision: "r", MaxAddresses: 2,
		Changes: []Change{{`x["a|b"]`, Create}, {"x[\"`rm -rf`\"]", Create}, {"x.c", Create}}}.Markdown()
	g.Expect(md).To(ContainSubstring("| + | `x[\"a\\|b\"]` |\n"))
	g.Expect(md).To(ContainSubstring("| + | `x[\"'rm -rf'\"]` |\n"))
	g.Expect(md).To(ContainSubstring("| | …and 1 more |\n"))
	g.Expect(md).NotTo(ContainSubstring("x.c"))

	var many []Change
	for i := range 5000 {
		many = append(many, Change{Address: fmt.Sprintf("module.m.terraform_data.resource_with_a_long_name[%d]", i), Action: Destroy})
	}
	md = Summary{Namespace: "n", Name: "p", PlanID: "plan-1", Revision: "r", MaxAddresses: 100000, Changes: many}.Markdown()
	g.Expect(len(md)).To(BeNumerically("<=", MaxMessage))
	g.Expect(md).To(MatchRegexp(`\| \| …and \d+ more \|`))
	g.Expect(md).To(HaveSuffix("`landform plan show p -n n`\n"))
	g.Expect(strings.Count(md, "| - |")).To(BeNumerically(">", 50))
}

func TestChangesRefusesGarbage(t *testing.T) {
	_, err := Changes([]byte("not json"))
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("reading the JSON plan")))
}
