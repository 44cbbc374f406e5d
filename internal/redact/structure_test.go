package redact

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// A Secret key holding a JSON object for a map(string) variable: terraform
// prints its values one by one. A multi-line value (a PEM key) may be
// printed a line at a time.
func TestStructuredValuesAreRedactedPartByPart(t *testing.T) {
	r := New(`{"user": "app", "password": "hunter2-xyz", "nested": {"token": "tok-98765"}, "list": ["item-secret", 31415926]}`,
		"-----BEGIN KEY-----\n  line-one-of-key\nline-two-of-key\n-----END KEY-----")
	text := strings.Join([]string{
		`  + password = "hunter2-xyz"`,
		`  + token    = "tok-98765"`,
		`  + items    = ["item-secret"]`,
		`  + number   = 31415926`,
		`  + user     = "app"`,
		`key: line-one-of-key`,
		`key: line-two-of-key`,
	}, "\n")
	got := r.String(text)
	for _, secret := range []string{"hunter2-xyz", "tok-98765", "item-secret", "31415926", "line-one-of-key", "line-two-of-key"} {
		if strings.Contains(got, secret) {
			t.Errorf("%q left in:\n%s", secret, got)
		}
	}
	if !strings.Contains(got, `user     = "app"`) {
		t.Errorf("a value shorter than MinLength was masked:\n%s", got)
	}
}

func TestPartsOfPlainValues(t *testing.T) {
	if p := Parts("just-a-password"); len(p) != 1 {
		t.Fatalf("parts of a plain value: %q", p)
	}
	if p := Parts("{not json"); len(p) != 1 {
		t.Fatalf("parts of a value that only looks like JSON: %q", p)
	}
}

// FuzzRedact: a secret inserted anywhere in any text never survives
// String, nor the streaming Writer however the text is split into writes,
// and both give the same output. A secret registered inside a JSON object
// is masked where it appears alone.
func FuzzRedact(f *testing.F) {
	f.Add("s3cr3t-value", "before ", " after\nnext line", uint8(3), false)
	f.Add("pass\nword", "", "", uint8(1), true)
	f.Add("abcd", "abcabcab", "cdabcd", uint8(7), false)
	f.Add("<&>\"x", "a\\u003c", "\"", uint8(2), true)
	f.Fuzz(func(t *testing.T, secret, prefix, suffix string, split uint8, inJSON bool) {
		if len(secret) < MinLength || strings.Contains(secret, "*") || (inJSON && !utf8.ValidString(secret)) {
			// A JSON document holds only valid UTF-8.
			t.Skip()
		}
		registered := secret
		if inJSON {
			registered = `{"k": ` + jsonString(secret) + `}`
		}
		r := New(registered)
		text := prefix + secret + suffix + secret
		got := r.String(text)
		if strings.Contains(got, secret) {
			t.Fatalf("secret %q survives in %q", secret, got)
		}
		var buf bytes.Buffer
		w := r.Writer(&buf)
		n := int(split)%8 + 1
		for i := 0; i < len(text); i += n {
			end := min(i+n, len(text))
			if _, err := w.Write([]byte(text[i:end])); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.(Flusher).Flush(); err != nil {
			t.Fatal(err)
		}
		if buf.String() != got {
			t.Fatalf("Writer (writes of %d) gave %q, String %q", n, buf.String(), got)
		}
	})
}

func jsonString(s string) string {
	var b bytes.Buffer
	b.WriteByte('"')
	for _, c := range s {
		switch c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case '\n':
			b.WriteString(`\n`)
		default:
			if c < 0x20 {
				b.WriteString(`\u00`)
				b.WriteString(string("0123456789abcdef"[c>>4]))
				b.WriteString(string("0123456789abcdef"[c&0xf]))
			} else {
				b.WriteRune(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
