package planview

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"
)

// KnownAfterApply is an attribute's After when the plan cannot know it yet.
const KnownAfterApply = "(known after apply)"

// maxAttributes caps one resource's attributes: a list of thousands of
// elements would otherwise fill the review.
const maxAttributes = 200

// Resource is one resource's change as a reviewer reads it.
type Resource struct {
	Address string
	Actions tfjson.Actions
	// Symbol is Change.Symbol of it ("-/+").
	Symbol string
	// Note is Change.Note of it (" (replace)"), or "".
	Note string
	// Destructive: the change deletes or replaces the object.
	Destructive bool
	Import      bool
	Deposed     bool
	// Attributes are the attribute paths the change touches, in path
	// order (object keys sorted, list elements by index): for a create
	// every non-null leaf after, for a delete every non-null leaf before,
	// for an update or replace the leaves whose value changes or is
	// unknown, for an import that changes nothing every non-null leaf of
	// the object it adopts (Changed false). At most 200 are listed; the
	// rest are counted by one last Attribute{Path: "…", After: "N more
	// attributes"}, Changed when any of them is.
	Attributes []Attribute
}

// Attribute is one attribute path's before and after.
type Attribute struct {
	// Path is dotted, with [i] for list elements: "tags.Name",
	// "ingress[0].from_port"; a key that is not an identifier is quoted
	// in brackets: `tags["kubernetes.io/role"]`.
	Path string
	// Before is the compact JSON text of the value before ("" when it
	// did not exist; null is "null", but a null object or list whose
	// other side has leaves lists those leaves, with ""), or
	// SensitiveValue when it is sensitive.
	Before string
	// After is the JSON text of the value after ("" when it will not
	// exist), KnownAfterApply when the plan cannot know it, or
	// SensitiveValue when it is sensitive.
	After string
	// ForcesReplacement: the path is, or is under, one of the change's
	// replace_paths.
	ForcesReplacement bool
	// Changed: Before and After differ, After is unknown, or a value
	// masked in whole or in part changes (terraform's
	// "~ password = (sensitive value)").
	Changed bool
}

// Diff reads a stored JSON plan (terraform show -json), masks every
// sensitive value first with Redact (so no sensitive value can reach the
// result), and returns the resource changes and the drift (resource_drift)
// the plan found, each ordered for review: replaces, destroys, forgets,
// creates, updates, reads, then imports that change nothing; by address
// within a kind. No-op changes are left out unless they import.
//
// A masked value stays SensitiveValue and is never expanded. Whether it
// changes is read from the plan before masking: that one bit is all that
// leaves the unmasked plan, as terraform's own plan output shows it. A
// sensitive value the engine copied without its mark (OpenTofu's prior
// `output` of a terraform_data fed a sensitive input) is masked too, by
// Redact, wherever it is in the plan.
func Diff(data []byte, secretVar func(name string) bool) (changes, drift []Resource, err error) {
	doc, err := Redact(data, secretVar)
	if err != nil {
		return nil, nil, err
	}
	raw, err := decode(data)
	if err != nil {
		return nil, nil, err
	}
	changes = resources(asSlice(doc["resource_changes"]), asSlice(raw["resource_changes"]))
	drift = resources(asSlice(doc["resource_drift"]), asSlice(raw["resource_drift"]))
	return changes, drift, nil
}

// resources reads resource changes; raw are the same before masking.
func resources(masked, raw []any) []Resource {
	var out []Resource
	for i, r := range masked {
		rc := asMap(r)
		c := asMap(rc["change"])
		if c == nil {
			continue
		}
		var actions tfjson.Actions
		for _, a := range asSlice(c["actions"]) {
			s, _ := a.(string)
			actions = append(actions, tfjson.Action(s))
		}
		deposed, _ := rc["deposed"].(string)
		address, _ := rc["address"].(string)
		ch := Change{Address: address, Actions: actions, Deposed: deposed != "", Import: c["importing"] != nil}
		if !ch.Import && (actions.NoOp() || len(actions) == 0) {
			continue
		}
		var rawChange map[string]any
		if i < len(raw) {
			rawChange = asMap(asMap(raw[i])["change"])
		}
		out = append(out, Resource{
			Address:     ch.Address,
			Actions:     ch.Actions,
			Symbol:      ch.Symbol(),
			Note:        ch.Note(),
			Destructive: ch.Destructive(),
			Import:      ch.Import,
			Deposed:     ch.Deposed,
			Attributes:  attributes(c, rawChange, actions.NoOp()),
		})
	}
	// Stable: a deposed object keeps its place after the current one.
	slices.SortStableFunc(out, func(a, b Resource) int {
		return cmp.Or(cmp.Compare(reviewOrder(a.Actions), reviewOrder(b.Actions)), strings.Compare(a.Address, b.Address))
	})
	return out
}

// reviewOrder ranks actions for review: what loses objects first.
func reviewOrder(a tfjson.Actions) int {
	switch {
	case a.Replace():
		return 0
	case a.Delete():
		return 1
	case slices.Contains(a, tfjson.ActionForget):
		return 2
	case a.Create():
		return 3
	case a.Update():
		return 4
	case a.Read():
		return 5
	}
	return 6 // an import that changes nothing
}

// The walk below is ours: terraform's own plan renderer is internal to
// terraform, and terraform-json parses plans but does not compare values.

// side is one side (before or after) of a value: masked is what the
// result may show, raw the same before masking, only ever compared.
type side struct {
	masked, raw any
	exists      bool
}

func (s side) child(key any) side {
	switch k := key.(type) {
	case string:
		m, ok := s.masked.(map[string]any)
		v, exists := m[k]
		return side{masked: v, raw: asMap(s.raw)[k], exists: ok && exists}
	case int:
		l, _ := s.masked.([]any)
		r := asSlice(s.raw)
		if k >= len(l) {
			return side{}
		}
		var rv any
		if k < len(r) {
			rv = r[k]
		}
		return side{masked: l[k], raw: rv, exists: true}
	}
	return side{}
}

// isNull: the value does not exist or is null.
func (s side) isNull() bool { return !s.exists || s.masked == nil }

func (s side) isMasked() bool { return s.exists && s.masked == SensitiveValue }

// text is the value as Attribute shows it.
func (s side) text() string {
	if !s.exists {
		return ""
	}
	if s.isMasked() {
		return SensitiveValue
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // "<a&b>", not "\u003ca\u0026b\u003e"
	if err := enc.Encode(s.masked); err != nil {
		return fmt.Sprintf("%v", s.masked)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

type walker struct {
	replace []string
	// all lists unchanged leaves too (an import that changes nothing).
	all   bool
	attrs []Attribute
}

// attributes lists the attributes of change c (masked) that a reviewer
// reads; raw is c before masking.
func attributes(c, raw map[string]any, noop bool) []Attribute {
	w := walker{all: noop}
	for _, p := range asSlice(c["replace_paths"]) {
		w.replace = append(w.replace, pathOf(asSlice(p)))
	}
	before := side{masked: c["before"], raw: raw["before"], exists: c["before"] != nil}
	after := side{masked: c["after"], raw: raw["after"], exists: c["after"] != nil}
	w.walk("", before, after, c["after_unknown"])
	if n := len(w.attrs) - maxAttributes; n > 0 {
		rest := w.attrs[maxAttributes:]
		more := Attribute{Path: "…", After: fmt.Sprintf("%d more attributes", n)}
		if n == 1 {
			more.After = "1 more attribute"
		}
		more.Changed = slices.ContainsFunc(rest, func(a Attribute) bool { return a.Changed })
		w.attrs = append(w.attrs[:maxAttributes:maxAttributes], more)
	}
	return w.attrs
}

// walk flattens before and after jointly into leaves. unknown is
// after_unknown at path: true, or shaped like after. A value unknown
// after lists the leaves it had before, each known after apply.
func (w *walker) walk(path string, before, after side, unknown any) {
	if isTrue(unknown) {
		after = side{}
	}
	kind, ok := containerKind(before, after, unknown)
	if !ok {
		w.leaf(path, before, after, isTrue(unknown))
		return
	}
	// childUnknown is after_unknown at a child: all of it when unknown is
	// true here.
	childUnknown := func(u any) any {
		if isTrue(unknown) {
			return true
		}
		return u
	}
	switch kind {
	case 'o':
		keys := map[string]bool{}
		for _, m := range []any{before.masked, after.masked} {
			for k := range asMap(m) {
				keys[k] = true
			}
		}
		for k, u := range asMap(unknown) {
			if hasTrue(u) {
				keys[k] = true
			}
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			w.walk(keyPath(path, k), before.child(k), after.child(k), childUnknown(asMap(unknown)[k]))
		}
	case 'l':
		n := max(len(asSlice(before.masked)), len(asSlice(after.masked)))
		for i, u := range asSlice(unknown) {
			if hasTrue(u) {
				n = max(n, i+1)
			}
		}
		for i := range n {
			var u any
			if us := asSlice(unknown); i < len(us) {
				u = us[i]
			}
			w.walk(path+"["+strconv.Itoa(i)+"]", before.child(i), after.child(i), childUnknown(u))
		}
	}
}

// containerKind says whether walk descends at a value: when every side
// that is not null is an object ('o'), or every one a list ('l'), and
// there is something inside. A null side reads as empty, so an object
// that appears lists its leaves; an empty list or object is a leaf.
func containerKind(before, after side, unknown any) (byte, bool) {
	var kinds []byte
	children := false
	for _, s := range []side{before, after} {
		if s.isNull() {
			continue
		}
		switch v := s.masked.(type) {
		case map[string]any:
			kinds = append(kinds, 'o')
			children = children || len(v) > 0
		case []any:
			kinds = append(kinds, 'l')
			children = children || len(v) > 0
		default:
			return 0, false
		}
	}
	if hasTrue(unknown) && !isTrue(unknown) {
		switch unknown.(type) {
		case map[string]any:
			kinds = append(kinds, 'o')
		case []any:
			kinds = append(kinds, 'l')
		}
		children = true
	}
	if len(kinds) == 0 || !children || slices.Contains(kinds, 'o') && slices.Contains(kinds, 'l') {
		return 0, false
	}
	return kinds[0], true
}

func (w *walker) leaf(path string, before, after side, unknown bool) {
	a := Attribute{Path: path, Before: before.text(), After: after.text()}
	if unknown {
		a.After = KnownAfterApply
	}
	// The raw values decide where masking hides a difference: two
	// SensitiveValue, or two strings a secret was cut out of.
	a.Changed = unknown || a.Before != a.After || !reflect.DeepEqual(before.raw, after.raw)
	if !unknown && before.isNull() && after.isNull() {
		return
	}
	if !a.Changed && !w.all {
		return
	}
	a.ForcesReplacement = slices.ContainsFunc(w.replace, func(p string) bool { return under(path, p) })
	w.attrs = append(w.attrs, a)
}

// under reports whether path is p or inside it.
func under(path, p string) bool {
	if p == "" || path == p {
		return true
	}
	rest, ok := strings.CutPrefix(path, p)
	return ok && (rest[0] == '.' || rest[0] == '[')
}

// pathOf writes a replace_paths entry (keys and indexes) as an
// Attribute.Path.
func pathOf(steps []any) string {
	var path string
	for _, s := range steps {
		switch v := s.(type) {
		case string:
			path = keyPath(path, v)
		case json.Number:
			path += "[" + v.String() + "]"
		}
	}
	return path
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

func keyPath(path, key string) string {
	switch {
	case !identifier.MatchString(key):
		return path + "[" + strconv.Quote(key) + "]"
	case path == "":
		return key
	}
	return path + "." + key
}

// hasTrue reports whether an after_unknown value marks anything.
func hasTrue(v any) bool {
	switch v := v.(type) {
	case bool:
		return v
	case map[string]any:
		for _, x := range v {
			if hasTrue(x) {
				return true
			}
		}
	case []any:
		return slices.ContainsFunc(v, hasTrue)
	}
	return false
}
