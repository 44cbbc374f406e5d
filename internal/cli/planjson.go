package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// sensitiveValue replaces a sensitive value, as terraform shows it.
const sensitiveValue = "(sensitive value)"

// change is one resource change of a plan, as the CLI lists it.
type change struct {
	Address string
	Actions tfjson.Actions
	Deposed bool
	// Import: the change brings an existing object under management
	// (spec.imports), besides what its actions do.
	Import bool
}

// symbol is terraform's mark for the change.
func (c change) symbol() string {
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

// note says what a symbol alone does not.
func (c change) note() string {
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

// destructive reports a change that deletes or replaces an object.
func (c change) destructive() bool {
	return slices.Contains(c.Actions, tfjson.ActionDelete)
}

// planDetails is what the CLI reads from a stored JSON plan.
type planDetails struct {
	// Engine is the terraform_version the plan was made with.
	Engine string
	// Changes are the resource changes, no-ops left out unless they
	// import.
	Changes []change
	// Sensitive says, for every output the plan knows, whether it is
	// sensitive.
	Sensitive map[string]bool
}

// readPlanJSON parses `show -json` output.
func readPlanJSON(data []byte) (*planDetails, error) {
	var p tfjson.Plan
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("reading the JSON plan: %w", err)
	}
	d := &planDetails{Engine: p.TerraformVersion, Sensitive: map[string]bool{}}
	for _, rc := range p.ResourceChanges {
		if rc.Change == nil {
			continue
		}
		imports := rc.Change.Importing != nil
		if !imports && (rc.Change.Actions.NoOp() || len(rc.Change.Actions) == 0) {
			continue
		}
		d.Changes = append(d.Changes, change{Address: rc.Address, Actions: rc.Change.Actions, Deposed: rc.DeposedKey != "", Import: imports})
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

// imports are the addresses of the changes that import, in the plan's
// order (terraform's: by address).
func (d *planDetails) imports() []string {
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

// redactPlan returns the JSON plan with every value terraform marks
// sensitive replaced by "(sensitive value)": resource and output changes
// (before_sensitive, after_sensitive), planned values and prior state
// (sensitive_values, sensitive outputs), and the values and defaults of
// variables declared sensitive or read from a Secret (secretVar).
func redactPlan(data []byte, secretVar func(name string) bool) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers keep their exact text
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("reading the JSON plan: %w", err)
	}

	sensitiveVars := map[string]bool{}
	if root, ok := dig(doc, "configuration", "root_module").(map[string]any); ok {
		for name, v := range asMap(root["variables"]) {
			if m := asMap(v); m != nil && isTrue(m["sensitive"]) {
				sensitiveVars[name] = true
				if _, ok := m["default"]; ok {
					m["default"] = sensitiveValue
				}
			}
		}
	}
	for name, v := range asMap(doc["variables"]) {
		if m := asMap(v); m != nil && (sensitiveVars[name] || secretVar(name)) {
			m["value"] = sensitiveValue
		}
	}
	for _, key := range []string{"resource_changes", "resource_drift"} {
		for _, rc := range asSlice(doc[key]) {
			maskChange(asMap(asMap(rc)["change"]))
		}
	}
	for _, oc := range asMap(doc["output_changes"]) {
		maskChange(asMap(oc))
	}
	maskValues(asMap(doc["planned_values"]))
	maskValues(asMap(dig(doc, "prior_state", "values")))
	return doc, nil
}

func maskChange(c map[string]any) {
	if c == nil {
		return
	}
	c["before"] = mask(c["before"], c["before_sensitive"])
	c["after"] = mask(c["after"], c["after_sensitive"])
}

// maskValues masks planned_values or prior_state.values.
func maskValues(v map[string]any) {
	for _, o := range asMap(v["outputs"]) {
		if m := asMap(o); m != nil && isTrue(m["sensitive"]) {
			if _, ok := m["value"]; ok {
				m["value"] = sensitiveValue
			}
		}
	}
	maskModule(asMap(v["root_module"]))
}

func maskModule(m map[string]any) {
	for _, r := range asSlice(m["resources"]) {
		if rm := asMap(r); rm != nil {
			rm["values"] = mask(rm["values"], rm["sensitive_values"])
		}
	}
	for _, child := range asSlice(m["child_modules"]) {
		maskModule(asMap(child))
	}
}

// mask replaces the parts of v that marks (terraform's sensitivity
// structure: true, or an object or array shaped like v) flags.
func mask(v, marks any) any {
	switch mk := marks.(type) {
	case bool:
		if mk && v != nil {
			return sensitiveValue
		}
	case map[string]any:
		if vm, ok := v.(map[string]any); ok {
			for k, sub := range mk {
				if val, ok := vm[k]; ok {
					vm[k] = mask(val, sub)
				}
			}
		}
	case []any:
		if va, ok := v.([]any); ok {
			for i := range min(len(mk), len(va)) {
				va[i] = mask(va[i], mk[i])
			}
		}
	}
	return v
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		v = asMap(v)[k]
	}
	return v
}

// secretVariables reports the variables that may come from a Secret: the
// keys varsFrom reads from Secrets (every variable not set literally, when
// a Secret is read whole), unless a later ConfigMap key or spec.vars sets
// them.
func secretVariables(spec *v1alpha1.TerraformSpec) func(string) bool {
	fromSecret := map[string]bool{}
	wholeSecret := false
	for _, ref := range spec.VarsFrom {
		if ref.Kind == "Secret" && len(ref.VarsKeys) == 0 {
			wholeSecret = true
		}
		for _, sel := range ref.VarsKeys {
			key, name, found := strings.Cut(sel, ":")
			if !found {
				name = key
			}
			fromSecret[name] = ref.Kind == "Secret"
		}
	}
	literal := map[string]bool{}
	for _, v := range spec.Vars {
		literal[v.Name] = true
	}
	return func(name string) bool {
		if literal[name] {
			return false
		}
		if set, ok := fromSecret[name]; ok && !wholeSecret {
			return set
		}
		return wholeSecret || fromSecret[name]
	}
}
