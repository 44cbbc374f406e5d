package planview

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// Redact returns the JSON plan with every value terraform marks
// sensitive replaced by SensitiveValue: resource changes and drift and
// output changes (before_sensitive, after_sensitive), planned values and
// prior state (sensitive_values, sensitive outputs), and the values and
// defaults of variables declared sensitive or read from a Secret
// (secretVar; nil: none). Numbers keep their exact text (json.Number).
func Redact(data []byte, secretVar func(name string) bool) (map[string]any, error) {
	doc, err := decode(data)
	if err != nil {
		return nil, err
	}

	sensitiveVars := map[string]bool{}
	if root, ok := dig(doc, "configuration", "root_module").(map[string]any); ok {
		for name, v := range asMap(root["variables"]) {
			if m := asMap(v); m != nil && isTrue(m["sensitive"]) {
				sensitiveVars[name] = true
				if _, ok := m["default"]; ok {
					m["default"] = SensitiveValue
				}
			}
		}
	}
	for name, v := range asMap(doc["variables"]) {
		if m := asMap(v); m != nil && (sensitiveVars[name] || secretVar != nil && secretVar(name)) {
			m["value"] = SensitiveValue
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

// decode reads a JSON plan as generic values, numbers as json.Number.
func decode(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("reading the JSON plan: %w", err)
	}
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
				m["value"] = SensitiveValue
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
			return SensitiveValue
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

// SecretVariables reports the variables that may come from a Secret: the
// keys varsFrom reads from Secrets (every variable not set literally, when
// a Secret is read whole), unless a later ConfigMap key or spec.vars sets
// them.
func SecretVariables(spec *v1alpha1.TerraformSpec) func(string) bool {
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
