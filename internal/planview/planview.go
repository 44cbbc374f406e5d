// Package planview reads the JSON plans terraform and OpenTofu write
// (`show -json`) for people who review them: the CLI's `plan show` and
// `approve`, and the web UI. What a plan holds that is sensitive is masked
// here, once, for both.
package planview

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"
)

// SensitiveValue replaces a sensitive value, as terraform shows it.
const SensitiveValue = "(sensitive value)"

// Change is one resource change of a plan.
type Change struct {
	Address string
	Actions tfjson.Actions
	Deposed bool
	// Import: the change brings an existing object under management
	// (spec.imports), besides what its actions do.
	Import bool
}

// Symbol is terraform's mark for the change.
func (c Change) Symbol() string {
	switch {
	case c.Actions.DestroyBeforeCreate():
		return "-/+"
	case c.Actions.CreateBeforeDestroy():
		return "+/-"
	case c.Actions.Create():
		return "+"
	case c.Actions.Delete():
		return "-"
	case c.Actions.Update():
		return "~"
	case c.Actions.Read():
		return "<="
	case c.Import:
		// Terraform marks an import that changes nothing with no
		// symbol at all.
		return "<-"
	}
	return "."
}

// Note says what a symbol alone does not, as " (replace)", or "".
func (c Change) Note() string {
	var notes []string
	if c.Import {
		notes = append(notes, "import")
	}
	if c.Actions.Replace() {
		notes = append(notes, "replace")
	}
	if slices.Contains(c.Actions, tfjson.ActionForget) {
		notes = append(notes, "forget: removed from the state, kept in the cloud")
	}
	if c.Deposed {
		notes = append(notes, "deposed object")
	}
	if len(notes) == 0 {
		return ""
	}
	return " (" + strings.Join(notes, ", ") + ")"
}

// Destructive reports a change that deletes or replaces an object.
func (c Change) Destructive() bool {
	return slices.Contains(c.Actions, tfjson.ActionDelete)
}

// Details is what a review needs from a stored JSON plan besides its
// values.
type Details struct {
	// Engine is the terraform_version the plan was made with.
	Engine string
	// Changes are the resource changes in the plan's order (by
	// address), no-ops left out unless they import.
	Changes []Change
	// Sensitive says, for every output the plan knows, whether it is
	// sensitive.
	Sensitive map[string]bool
}

// Read parses `show -json` output.
func Read(data []byte) (*Details, error) {
	var p tfjson.Plan
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("reading the JSON plan: %w", err)
	}
	d := &Details{Engine: p.TerraformVersion, Sensitive: map[string]bool{}}
	for _, rc := range p.ResourceChanges {
		if rc.Change == nil {
			continue
		}
		imports := rc.Change.Importing != nil
		if !imports && (rc.Change.Actions.NoOp() || len(rc.Change.Actions) == 0) {
			continue
		}
		d.Changes = append(d.Changes, Change{Address: rc.Address, Actions: rc.Change.Actions, Deposed: rc.DeposedKey != "", Import: imports})
	}
	if p.PlannedValues != nil {
		for name, o := range p.PlannedValues.Outputs {
			d.Sensitive[name] = o != nil && o.Sensitive
		}
	}
	for name, oc := range p.OutputChanges {
		if oc == nil {
			continue
		}
		d.Sensitive[name] = d.Sensitive[name] || isTrue(oc.AfterSensitive) || isTrue(oc.BeforeSensitive)
	}
	return d, nil
}

// Imports are the addresses of the changes that import, in the plan's
// order (terraform's: by address).
func (d *Details) Imports() []string {
	var addrs []string
	for _, c := range d.Changes {
		if c.Import {
			addrs = append(addrs, c.Address)
		}
	}
	return addrs
}

func isTrue(v any) bool {
	b, ok := v.(bool)
	return ok && b
}
