package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// errApprovesAuto: the manifest approves every plan (approvePlan: auto),
// and a plan id there would turn that off.
var errApprovesAuto = errors.New("spec.approvePlan is auto")

// setApprovePlan returns data, a YAML file of one or more documents, with
// spec.approvePlan of the Terraform object namespace/name set to id, and
// whether it already was. Only that value changes (or one line is added):
// comments, order, quoting and the other documents stay byte for byte,
// which a YAML encoder would not keep, so the file is edited as text at
// the positions the parser reports, then parsed again to check that
// nothing else changed. A document without a namespace matches when no
// document names the namespace (kustomize sets it).
func setApprovePlan(data []byte, namespace, name, id string) ([]byte, bool, error) {
	nodes, values, err := decodeAll(data)
	if err != nil {
		return nil, false, err
	}
	var exact, unnamespaced []int
	var found []string
	for i, doc := range nodes {
		kind, apiVersion := scalar(doc, "kind"), scalar(doc, "apiVersion")
		if kind != v1alpha1.TerraformKind || !strings.HasPrefix(apiVersion, v1alpha1.GroupVersion.Group+"/") {
			continue
		}
		ns, n := scalar(doc, "metadata", "namespace"), scalar(doc, "metadata", "name")
		found = append(found, strings.TrimPrefix(ns+"/"+n, "/"))
		switch {
		case n == name && ns == namespace:
			exact = append(exact, i)
		case n == name && ns == "":
			unnamespaced = append(unnamespaced, i)
		}
	}
	matches := exact
	if len(matches) == 0 {
		matches = unnamespaced
	}
	switch {
	case len(matches) == 0 && len(found) == 0:
		return nil, false, fmt.Errorf("it holds no Terraform object (%s)", v1alpha1.GroupVersion.Group)
	case len(matches) == 0:
		return nil, false, fmt.Errorf("it holds no Terraform object %s/%s, only %s", namespace, name, strings.Join(found, ", "))
	case len(matches) > 1:
		return nil, false, fmt.Errorf("it holds %d Terraform objects named %s without a namespace: edit the right one by hand", len(matches), name)
	}
	doc := matches[0]

	spec := lookup(nodes[doc], "spec")
	switch {
	case spec == nil:
		return nil, false, errors.New("its Terraform object has no spec")
	case spec.Kind != yaml.MappingNode || spec.Style&yaml.FlowStyle != 0 || len(spec.Content) == 0:
		return nil, false, errors.New("its spec is not a block mapping: set spec.approvePlan by hand")
	}
	lines := lineStarts(data)
	var edited []byte
	if key, v := entry(spec, "approvePlan"); v != nil {
		switch {
		case v.Kind != yaml.ScalarNode:
			return nil, false, errors.New("its spec.approvePlan is not a string: set it by hand")
		case v.Value == id:
			return data, true, nil
		case v.Value == v1alpha1.ApprovePlanAuto:
			return nil, false, errApprovesAuto
		}
		if edited, err = replaceScalar(data, lines, key, v, id); err != nil {
			return nil, false, err
		}
	} else {
		// A new first key, on the line after `spec:`, indented as the
		// first key is: above any comment on that key.
		specKey, _ := entry(nodes[doc].Content[0], "spec")
		first := spec.Content[0]
		if first.Line <= specKey.Line || specKey.Line >= len(lines) {
			return nil, false, errors.New("its spec is not a block mapping: set spec.approvePlan by hand")
		}
		at := lines[specKey.Line] // the start of the line after `spec:`
		eol := "\n"
		if at >= 2 && data[at-2] == '\r' {
			eol = "\r\n"
		}
		line := strings.Repeat(" ", first.Column-1) + "approvePlan: " + id + eol
		edited = append(append(append([]byte{}, data[:at]...), line...), data[at:]...)
	}

	// The edit is checked as YAML: the file must mean what it meant, but
	// for that one value.
	_, after, err := decodeAll(edited)
	if err != nil || len(after) != len(values) {
		return nil, false, errors.New("editing it as text would change more than spec.approvePlan: set it by hand")
	}
	want := values[doc].(map[string]any)["spec"].(map[string]any)
	want["approvePlan"] = id
	if !reflect.DeepEqual(after, values) {
		return nil, false, errors.New("editing it as text would change more than spec.approvePlan: set it by hand")
	}
	return edited, false, nil
}

// decodeAll parses every document of data, as nodes (with positions) and
// as values (to compare).
func decodeAll(data []byte) ([]*yaml.Node, []any, error) {
	var nodes []*yaml.Node
	var values []any
	d := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := d.Decode(&n)
		if errors.Is(err, io.EOF) {
			return nodes, values, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("it is not valid YAML: %w", err)
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, nil, fmt.Errorf("it is not valid YAML: %w", err)
		}
		nodes, values = append(nodes, &n), append(values, v)
	}
}

// entry finds key in mapping m: its key and value nodes.
func entry(m *yaml.Node, key string) (*yaml.Node, *yaml.Node) {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

// lookup follows path from a document node.
func lookup(doc *yaml.Node, path ...string) *yaml.Node {
	if doc == nil || doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	n := doc.Content[0]
	for _, key := range path {
		if _, n = entry(n, key); n == nil {
			return nil
		}
	}
	return n
}

// scalar is the string at path, "" when there is none.
func scalar(doc *yaml.Node, path ...string) string {
	if n := lookup(doc, path...); n != nil && n.Kind == yaml.ScalarNode {
		return n.Value
	}
	return ""
}

// lineStarts are the byte offsets where lines start; lines[0] is line 1.
func lineStarts(data []byte) []int {
	starts := []int{0}
	for i, b := range data {
		if b == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// offset is the byte offset of a parser position (1-based line and
// column, the column in characters).
func offset(data []byte, lines []int, line, column int) int {
	at := lines[line-1]
	for i := 1; i < column && at < len(data); i++ {
		_, size := utf8.DecodeRune(data[at:])
		at += size
	}
	return at
}

// replaceScalar writes id over the value v of key, in v's quoting: plain,
// single or double quotes; an empty value gets one.
func replaceScalar(data []byte, lines []int, key, v *yaml.Node, id string) ([]byte, error) {
	start := offset(data, lines, v.Line, v.Column)
	end := start
	text := id
	switch {
	case v.Style&yaml.DoubleQuotedStyle != 0:
		end = closingQuote(data, start, '"')
		text = `"` + id + `"`
	case v.Style&yaml.SingleQuotedStyle != 0:
		end = closingQuote(data, start, '\'')
		text = "'" + id + "'"
	case v.Style == 0 && v.Value == "" && v.Line == key.Line:
		// `approvePlan:` with nothing after: the position is after the colon.
		text = " " + id
	case v.Style == 0 && bytes.HasPrefix(data[start:], []byte(v.Value)):
		end = start + len(v.Value)
	default:
		end = -1
	}
	if end < 0 {
		return nil, errors.New("its spec.approvePlan is written in a way this command does not edit: set it by hand")
	}
	return append(append(append([]byte{}, data[:start]...), text...), data[end:]...), nil
}

// closingQuote returns the offset after the quoted scalar that starts at
// start with quote, -1 when it does not end on its line.
func closingQuote(data []byte, start int, quote byte) int {
	if start >= len(data) || data[start] != quote {
		return -1
	}
	for i := start + 1; i < len(data) && data[i] != '\n'; i++ {
		switch {
		case quote == '"' && data[i] == '\\':
			i++
		case data[i] == quote && quote == '\'' && i+1 < len(data) && data[i+1] == '\'':
			i++
		case data[i] == quote:
			return i + 1
		}
	}
	return -1
}
