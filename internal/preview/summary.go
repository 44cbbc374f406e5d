// Package preview writes what a preview's plan tells a pull request: a
// short Markdown summary of the plan, addresses and counts only (never a
// value), bounded in size, for a PlanPreview event that notification-
// controller's pull request comment providers post; and the redacted form
// of a failed preview's messages. It reads the engine's JSON plan and
// needs no cluster.
package preview

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// MaxMessage bounds a summary: notification-controller adds its own
// header, and forges cap a comment (GitHub at 65536 characters).
const MaxMessage = 16 << 10

// Action is what a plan does to one resource, as the summary shows it.
type Action string

// Actions, in the order the summary lists them: what destroys first.
const (
	Replace Action = "-/+"
	Destroy Action = "-"
	Create  Action = "+"
	Update  Action = "~"
)

var order = []Action{Replace, Destroy, Create, Update}

// Change is one resource the plan changes.
type Change struct {
	Address string
	Action  Action
}

// Changes reads the resource changes of a JSON plan (`terraform show
// -json`), in the summary's order; no-ops and reads are left out.
func Changes(jsonPlan []byte) ([]Change, error) {
	var p struct {
		ResourceChanges []struct {
			Address string `json:"address"`
			Change  struct {
				Actions []string `json:"actions"`
			} `json:"change"`
		} `json:"resource_changes"`
	}
	if err := json.Unmarshal(jsonPlan, &p); err != nil {
		return nil, fmt.Errorf("reading the JSON plan: %w", err)
	}
	var out []Change
	for _, rc := range p.ResourceChanges {
		a, ok := actionOf(rc.Change.Actions)
		if ok {
			out = append(out, Change{Address: rc.Address, Action: a})
		}
	}
	slices.SortStableFunc(out, func(x, y Change) int {
		return cmp.Or(cmp.Compare(slices.Index(order, x.Action), slices.Index(order, y.Action)), strings.Compare(x.Address, y.Address))
	})
	return out, nil
}

func actionOf(actions []string) (Action, bool) {
	switch {
	case slices.Contains(actions, "delete") && slices.Contains(actions, "create"):
		return Replace, true
	case slices.Contains(actions, "delete"):
		return Destroy, true
	case slices.Contains(actions, "create"):
		return Create, true
	case slices.Contains(actions, "update"):
		return Update, true
	}
	return "", false
}

// Summary is what the PlanPreview event says of one plan.
type Summary struct {
	// Object is the preview, Namespace and Name.
	Namespace, Name string
	// PlanID and Revision are the plan's.
	PlanID, Revision string
	// Target is the object whose state the plan started from
	// (<namespace>/<name>); empty: an empty state.
	Target string
	// StateSerial is the serial of the snapshot; TargetAppliedPlan the
	// target's last applied plan when it was taken.
	StateSerial       int64
	TargetAppliedPlan string
	// Changes are the plan's, in the summary's order.
	Changes []Change
	// MaxAddresses is how many addresses are listed; the rest are
	// counted.
	MaxAddresses int
}

// Markdown is the summary as a pull request comment shows it, at most
// MaxMessage bytes.
func (s Summary) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "**Plan %s** of %s %s:\n", code(s.PlanID), code(s.Revision), s.against())
	counts := map[Action]int{}
	for _, c := range s.Changes {
		counts[c.Action]++
	}
	if len(s.Changes) == 0 {
		b.WriteString("**no changes**\n")
	} else {
		fmt.Fprintf(&b, "**+%d ~%d -%d**", counts[Create]+counts[Replace], counts[Update], counts[Destroy]+counts[Replace])
		if counts[Replace] > 0 {
			fmt.Fprintf(&b, " (%d replaced)", counts[Replace])
		}
		b.WriteString("\n\n| | address |\n|:-:|---|\n")
	}
	footer := s.footer()
	listed := 0
	for _, c := range s.Changes {
		row := fmt.Sprintf("| %s | %s |\n", c.Action, code(c.Address))
		if listed == s.MaxAddresses || b.Len()+len(row)+len(footer)+64 > MaxMessage {
			break
		}
		b.WriteString(row)
		listed++
	}
	if more := len(s.Changes) - listed; more > 0 {
		fmt.Fprintf(&b, "| | …and %d more |\n", more)
	}
	b.WriteString(footer)
	return b.String()
}

func (s Summary) against() string {
	if s.Target == "" {
		return "against an empty state"
	}
	after := ""
	if s.TargetAppliedPlan != "" {
		after = ", after " + code(s.TargetAppliedPlan)
	}
	return fmt.Sprintf("against %s (state serial %d%s)", code(s.Target), s.StateSerial, after)
}

func (s Summary) footer() string {
	through := "its target"
	if s.Target != "" {
		through = code(s.Target)
	}
	return fmt.Sprintf("\nNothing here is applied: a merge applies through %s, which plans again and waits for its own approval.\nThe whole plan: `landform plan show %s -n %s`\n",
		through, s.Name, s.Namespace)
}

// code is s as inline code in a Markdown table: a backtick would end it
// and a pipe the cell, and an address may hold either (x["a|b"]).
func code(s string) string {
	s = strings.NewReplacer("`", "'", "|", `\|`, "\n", " ", "\r", " ").Replace(s)
	return "`" + s + "`"
}

// Redacted is what a preview's failure event says in place of the
// engine's text (spec.preview.summary.errors Redacted): the reason, and
// where the people who may read the run's log find it.
func Redacted(reason, namespace, name string) string {
	return fmt.Sprintf("%s: the error text is kept out of preview events (spec.preview.summary.errors: Redacted); `landform logs %s -n %s` shows it to whoever may read the run's log", reason, name, namespace)
}
