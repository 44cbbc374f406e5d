package planview

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// Redact returns the JSON plan with every value terraform marks
// sensitive replaced by SensitiveValue: resource changes and drift and
// output changes (before_sensitive, after_sensitive), planned values and
// prior state (sensitive_values, sensitive outputs), and the values and
// defaults of variables declared sensitive or read from a Secret
// (secretVar; nil: none). Numbers keep their exact text (json.Number).
//
// Marks alone do not hide every secret: the engine drops the mark when it
// copies a value. In OpenTofu 1.12.6 (testdata/plan.json) the prior
// `output` of a terraform_data fed a sensitive input holds the old
// password with no mark in before_sensitive nor in the prior state's
// sensitive_values, while its `input` is marked. So Redact first gathers
// every value that is sensitive anywhere in the plan, then, after masking
// the marked ones, replaces what is left of them anywhere in the document
// (object keys aside, as they name things): a string or number equal to
// one becomes SensitiveValue, and each occurrence inside a longer string
// becomes SensitiveValue ("postgres://admin:(sensitive value)@db").
//
// A gathered value is a string, or the text of a number, of at least
// minSecret characters (a sensitive 5432 masks every 5432 of the plan,
// inside strings too). A shorter one would mask every "1", "on" or "dev"
// of the plan, and a value that short is guessed anyway. Booleans never:
// "true" would mask every flag, and one bit cannot be hidden by value.
// A null stays null, sensitive or not: it holds no secret.
func Redact(data []byte, secretVar func(name string) bool) (map[string]any, error) {
	doc, err := decode(data)
	if err != nil {
		return nil, err
	}
	secrets := sensitiveValues(doc, secretVar)
	eachSensitive(doc, secretVar, mask)
	if len(secrets) > 0 {
		maskCopies(doc, secrets)
	}
	return doc, nil
}

// RedactText masks in text, terraform's human-readable plan, every value
// that jsonPlan (the same plan's JSON) holds as sensitive, as Redact masks
// the copies in the JSON: the engine prints a copy whose mark it dropped
// (terraform_data's output, on OpenTofu 1.12.6) in the text too.
func RedactText(text, jsonPlan []byte, secretVar func(name string) bool) ([]byte, error) {
	doc, err := decode(jsonPlan)
	if err != nil {
		return nil, err
	}
	secrets := sensitiveValues(doc, secretVar)
	if len(secrets) == 0 {
		return text, nil
	}
	return []byte(cutSecrets(string(text), secrets)), nil
}

// sensitiveValues gathers every value doc holds as sensitive anywhere.
func sensitiveValues(doc map[string]any, secretVar func(string) bool) map[string]bool {
	secrets := map[string]bool{}
	eachSensitive(doc, secretVar, func(v, marks any) any {
		gather(v, marks, secrets)
		return v
	})
	return secrets
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

// eachSensitive calls f with every value of doc that the plan marks
// sensitive or that holds such a value, and its marks (true: all of it;
// or shaped like the value), and puts what f returns in its place.
func eachSensitive(doc map[string]any, secretVar func(string) bool, f func(v, marks any) any) {
	sensitiveVars := map[string]bool{}
	if root, ok := dig(doc, "configuration", "root_module").(map[string]any); ok {
		for name, v := range asMap(root["variables"]) {
			if m := asMap(v); m != nil && isTrue(m["sensitive"]) {
				sensitiveVars[name] = true
				whole(m, "default", f)
			}
		}
	}
	for name, v := range asMap(doc["variables"]) {
		if m := asMap(v); m != nil && (sensitiveVars[name] || secretVar != nil && secretVar(name)) {
			whole(m, "value", f)
		}
	}
	for _, key := range []string{"resource_changes", "resource_drift"} {
		for _, rc := range asSlice(doc[key]) {
			change(asMap(asMap(rc)["change"]), f)
		}
	}
	for _, oc := range asMap(doc["output_changes"]) {
		change(asMap(oc), f)
	}
	values(asMap(doc["planned_values"]), f)
	values(asMap(dig(doc, "prior_state", "values")), f)
}

// whole passes m[key], sensitive as a whole, to f when m has it.
func whole(m map[string]any, key string, f func(v, marks any) any) {
	if v, ok := m[key]; ok {
		m[key] = f(v, true)
	}
}

func change(c map[string]any, f func(v, marks any) any) {
	if c == nil {
		return
	}
	c["before"] = f(c["before"], c["before_sensitive"])
	c["after"] = f(c["after"], c["after_sensitive"])
}

// values walks planned_values or prior_state.values.
func values(v map[string]any, f func(v, marks any) any) {
	for _, o := range asMap(v["outputs"]) {
		if m := asMap(o); m != nil && isTrue(m["sensitive"]) {
			whole(m, "value", f)
		}
	}
	module(asMap(v["root_module"]), f)
}

func module(m map[string]any, f func(v, marks any) any) {
	for _, r := range asSlice(m["resources"]) {
		if rm := asMap(r); rm != nil {
			rm["values"] = f(rm["values"], rm["sensitive_values"])
		}
	}
	for _, child := range asSlice(m["child_modules"]) {
		module(asMap(child), f)
	}
}

// minSecret is the length (in characters) below which a sensitive value
// is not looked for outside its marks; see Redact.
const minSecret = 4

// gather adds to secrets the leaves of v that marks flags (see mask):
// strings and the text of numbers, of at least minSecret characters.
func gather(v, marks any, secrets map[string]bool) {
	switch mk := marks.(type) {
	case bool:
		if mk {
			leaves(v, func(s string) {
				if utf8.RuneCountInString(s) >= minSecret && s != SensitiveValue {
					secrets[s] = true
				}
			})
		}
	case map[string]any:
		vm := asMap(v)
		for k, sub := range mk {
			gather(vm[k], sub, secrets)
		}
	case []any:
		va := asSlice(v)
		for i := range min(len(mk), len(va)) {
			gather(va[i], mk[i], secrets)
		}
	}
}

// leaves calls f with the text of every string and number in v.
func leaves(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case json.Number:
		f(x.String())
	case map[string]any:
		for _, e := range x {
			leaves(e, f)
		}
	case []any:
		for _, e := range x {
			leaves(e, f)
		}
	}
}

// maskCopies replaces, in every value below v (not in object keys), what
// equals or holds one of secrets; see Redact.
func maskCopies(v any, secrets map[string]bool) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = maskCopies(e, secrets)
		}
	case []any:
		for i, e := range x {
			x[i] = maskCopies(e, secrets)
		}
	case json.Number:
		if secrets[x.String()] {
			return SensitiveValue
		}
	case string:
		if x != SensitiveValue {
			return cutSecrets(x, secrets)
		}
	}
	return v
}

// cutSecrets replaces each occurrence of secrets in s by SensitiveValue.
// Every secret is looked for in s as given and the spans found are
// merged, so a secret inside a longer one goes with it (as a replace of
// the longest first would do), and two that overlap go whole: replaced
// one after the other, "xabcy" with secrets "xab" and "bcy" would keep
// "cy".
func cutSecrets(s string, secrets map[string]bool) string {
	var spans [][2]int
	for secret := range secrets {
		for i := 0; ; {
			j := strings.Index(s[i:], secret)
			if j < 0 {
				break
			}
			spans = append(spans, [2]int{i + j, i + j + len(secret)})
			i += j + 1
		}
	}
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return cmp.Compare(a[0], b[0]) })
	var b strings.Builder
	end := 0
	for _, sp := range spans {
		switch {
		case sp[0] >= end:
			b.WriteString(s[end:sp[0]])
			b.WriteString(SensitiveValue)
			end = sp[1]
		case sp[1] > end: // overlaps the one just cut: cut its rest too
			end = sp[1]
		}
	}
	b.WriteString(s[end:])
	return b.String()
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
