// Package outputs turns a module's outputs into the data of the Secret
// workloads mount, and writes that Secret.
package outputs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// Output is one module output as `terraform output -json` reports it.
type Output struct {
	Name      string
	Value     json.RawMessage
	Sensitive bool
}

// Names returns the output names, sorted; status shows these, never values.
func Names(outs []Output) []string {
	names := make([]string, 0, len(outs))
	for _, o := range outs {
		names = append(names, o.Name)
	}
	slices.Sort(names)
	return names
}

// SecretData selects outputs and renders them as Secret data. A selection
// entry is "name" or "name:alias" (written under key alias); an empty
// selection takes every output. Strings are written raw, so a workload
// reads a password as the password; every other type is written as
// compact JSON. Errors name outputs and keys, never values.
func SecretData(outs []Output, selection []string) (map[string][]byte, error) {
	byName := make(map[string]Output, len(outs))
	for _, o := range outs {
		byName[o.Name] = o
	}
	if len(selection) == 0 {
		selection = Names(outs)
	}
	data := make(map[string][]byte, len(selection))
	from := make(map[string]string, len(selection)) // key → output, for clashes
	for _, sel := range selection {
		name, key, _ := strings.Cut(sel, ":")
		if key == "" {
			key = name
		}
		o, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("output %q is selected in writeOutputsToSecret.outputs but the module has no such output; available: %s",
				name, available(outs))
		}
		if errs := validation.IsConfigMapKey(key); len(errs) > 0 {
			return nil, fmt.Errorf("output %q cannot be written under key %q: %s", name, key, strings.Join(errs, "; "))
		}
		if prev, dup := from[key]; dup {
			return nil, fmt.Errorf("outputs %q and %q are both written under key %q; give one an alias", prev, name, key)
		}
		v, err := render(o.Value)
		if err != nil {
			return nil, fmt.Errorf("output %q has an invalid JSON value: %w", name, err)
		}
		data[key], from[key] = v, name
	}
	return data, nil
}

func available(outs []Output) string {
	if len(outs) == 0 {
		return "none"
	}
	return strings.Join(Names(outs), ", ")
}

// render writes a JSON string as its raw text and anything else as compact
// JSON. Errors from encoding/json quote offsets, not content, so they are
// safe to return.
func render(v json.RawMessage) ([]byte, error) {
	trimmed := bytes.TrimSpace(v)
	if len(trimmed) > 0 && trimmed[0] == '"' {
		var s string
		if err := json.Unmarshal(trimmed, &s); err != nil {
			return nil, errorWithoutValue(err)
		}
		return []byte(s), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, trimmed); err != nil {
		return nil, errorWithoutValue(err)
	}
	return buf.Bytes(), nil
}

// errorWithoutValue keeps only the kind of a JSON error: some of them
// (invalid character 'x') quote bytes of a sensitive value.
func errorWithoutValue(err error) error {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return fmt.Errorf("syntax error at offset %d", syntax.Offset)
	}
	return errors.New("cannot be decoded")
}

// Keys maps each output of names to the Secret keys spec writes it under
// ("name:key" selections; every output under its own name when spec
// selects none). An output spec does not select has no keys.
func Keys(spec *v1alpha1.WriteOutputsToSecretSpec, names []string) map[string][]string {
	keys := map[string][]string{}
	if spec == nil {
		return keys
	}
	if len(spec.Outputs) == 0 {
		for _, n := range names {
			keys[n] = []string{n}
		}
		return keys
	}
	for _, sel := range spec.Outputs {
		n, k, _ := strings.Cut(sel, ":")
		if k == "" {
			k = n
		}
		keys[n] = append(keys[n], k)
	}
	return keys
}
