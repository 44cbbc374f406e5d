// Package redact hides known secret values (sensitive variables and outputs)
// in text that leaves the controller: logs, events, conditions, errors.
package redact

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
)

// Mask replaces every secret value.
const Mask = "***"

// MinLength is the shortest value that is redacted. Shorter values ("1",
// "yes", "dev") occur everywhere in ordinary text: masking them would make
// logs unreadable while hiding nothing an attacker could not guess.
const MinLength = 4

// Redactor replaces known secret values in text. Values shorter than
// MinLength bytes are ignored. The zero value and a nil *Redactor redact
// nothing. A Redactor is safe for concurrent use once built.
type Redactor struct {
	// byFirst indexes the forms to hide by their first byte, longest first,
	// so that at any position the longest secret wins over one of its
	// prefixes.
	byFirst map[byte][][]byte
	// longest is the length of the longest form, which bounds how much of a
	// stream must be held back when a secret may continue past it.
	longest int
}

// New returns a Redactor for values. Besides each value as given, it also
// hides the value as it appears inside a JSON string (Terraform's JSON plans
// and machine-readable logs escape quotes, backslashes, newlines and, by
// default, <, > and &), and the parts a value is made of (see Parts):
// terraform prints a map variable's values one by one, never the JSON
// document they came in.
func New(values ...string) *Redactor {
	r := &Redactor{byFirst: map[byte][][]byte{}}
	seen := map[string]bool{}
	var all []string
	for _, v := range values {
		all = append(all, Parts(v)...)
	}
	for _, v := range all {
		if len(v) < MinLength {
			continue
		}
		for _, form := range forms(v) {
			if seen[form] {
				continue
			}
			seen[form] = true
			r.byFirst[form[0]] = append(r.byFirst[form[0]], []byte(form))
			r.longest = max(r.longest, len(form))
		}
	}
	for _, list := range r.byFirst {
		sort.SliceStable(list, func(i, j int) bool { return len(list[i]) > len(list[j]) })
	}
	return r
}

// Parts returns v and what terraform may print of it separately: every
// string, number and boolean inside v when v is a JSON object or array
// (a map(string) variable from a Secret key), and every line of a
// multi-line value, without its surrounding spaces.
func Parts(v string) []string {
	out := []string{v}
	var doc any
	dec := json.NewDecoder(strings.NewReader(v))
	dec.UseNumber()
	if t := strings.TrimSpace(v); (strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[")) && dec.Decode(&doc) == nil {
		out = appendLeaves(out, doc)
	}
	if strings.Contains(v, "\n") {
		for _, line := range strings.Split(v, "\n") {
			if line = strings.TrimSpace(line); line != "" {
				out = append(out, line)
			}
		}
	}
	return out
}

func appendLeaves(out []string, v any) []string {
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			out = appendLeaves(out, e)
		}
	case []any:
		for _, e := range x {
			out = appendLeaves(out, e)
		}
	case string:
		out = append(out, Parts(x)...)
	case json.Number:
		out = append(out, x.String())
	case bool:
		out = append(out, strconv.FormatBool(x))
	}
	return out
}

// forms returns v and its JSON-escaped forms, with and without Go's HTML
// escaping, without the surrounding quotes.
func forms(v string) []string {
	out := []string{v}
	if b, err := json.Marshal(v); err == nil {
		out = append(out, string(b[1:len(b)-1]))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err == nil {
		b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		out = append(out, string(b[1:len(b)-1]))
	}
	return out
}

// String returns s with every known value replaced by Mask.
func (r *Redactor) String(s string) string {
	if r == nil || len(r.byFirst) == 0 {
		return s
	}
	out, _ := r.redact(nil, []byte(s), len(s), true)
	return string(out)
}

// redact appends to dst the redacted form of buf, deciding for positions
// before limit. When final is false it stops at the first position where a
// secret might begin but buf ends before it could be told apart, so the
// caller can hold that tail until more data arrives. It returns how many
// bytes of buf were consumed.
func (r *Redactor) redact(dst, buf []byte, limit int, final bool) ([]byte, int) {
	i := 0
	for i < limit {
		matched, partial := 0, false
		for _, form := range r.byFirst[buf[i]] {
			rest := buf[i:]
			if bytes.HasPrefix(rest, form) {
				matched = len(form)
				break
			}
			if !final && len(rest) < len(form) && bytes.HasPrefix(form, rest) {
				// A longer form may still match once more arrives:
				// it wins over any shorter one (a line of a secret
				// that spans lines), so hold.
				partial = true
				break
			}
		}
		switch {
		case matched > 0:
			dst = append(dst, Mask...)
			i += matched
		case partial:
			return dst, i
		default:
			dst = append(dst, buf[i])
			i++
		}
	}
	return dst, i
}
