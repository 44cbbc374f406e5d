package redact

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		in     string
		want   string
	}{
		{"plain value", []string{"hunter22"}, "password=hunter22 ok", "password=*** ok"},
		{"every occurrence", []string{"s3cr3t"}, "s3cr3t and s3cr3t", "*** and ***"},
		{"short values ignored", []string{"abc", "1"}, "abc 1 abcd", "abc 1 abcd"},
		{"exactly MinLength", []string{"abcd"}, "x abcd y", "x *** y"},
		{"longest wins over prefix", []string{"token", "token-long"}, "a token-long b token", "a *** b ***"},
		{"json escaped quotes", []string{`pa"ss\word`}, `{"v":"pa\"ss\\word"}`, `{"v":"***"}`},
		{"json escaped newline", []string{"line1\nline2"}, `{"v":"line1\nline2"}`, `{"v":"***"}`},
		{"json html escaped", []string{"a<b>&c"}, `{"v":"a\u003cb\u003e\u0026c"}`, `{"v":"***"}`},
		{"json not html escaped", []string{"a<b>&c"}, `{"v":"a<b>&c"}`, `{"v":"***"}`},
		{"no values", nil, "nothing to hide", "nothing to hide"},
		{"adjacent", []string{"abcd", "efgh"}, "abcdefgh", "******"},
		{"unicode", []string{"mot-de-passé"}, "x=mot-de-passé", "x=***"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := New(tt.values...).String(tt.in); got != tt.want {
				t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestJSONFormsMatchEncodingJSON(t *testing.T) {
	// Whatever encoding/json produces for a value must be hidden.
	v := "q\"u\\o\tte\n<&>\u2028end"
	b, err := json.Marshal(map[string]string{"k": v})
	if err != nil {
		t.Fatal(err)
	}
	got := New(v).String(string(b))
	if want := `{"k":"***"}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestNilRedactor(t *testing.T) {
	var r *Redactor
	if got := r.String("secret-value"); got != "secret-value" {
		t.Errorf("nil redactor changed text: %q", got)
	}
}

func TestWriter(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		writes []string
		// wantBeforeFlush is what reached the underlying writer before Flush.
		wantBeforeFlush string
		want            string
	}{
		{"whole lines only", []string{"hunter22"}, []string{"pass", "word=hun", "ter22\nnext li", "ne"},
			"password=***\n", "password=***\nnext line"},
		{"secret split across writes", []string{"topsecret"}, []string{"a top", "sec", "ret b\n"},
			"a *** b\n", "a *** b\n"},
		{"multi-line secret", []string{"-----BEGIN KEY-----\nabc\n-----END KEY-----"}, []string{"key:\n-----BEGIN KEY-----\n", "abc\n", "-----END KEY-----\nafter\n"},
			"key:\n***\nafter\n", "key:\n***\nafter\n"},
		// The held line is the secret's first line, which is itself
		// hidden: terraform may print a value line by line.
		{"held prefix that turns out to be one line of the secret", []string{"abcdef\nxyz1"}, []string{"abcdef\n", "nope\n"},
			"***\nnope\n", "***\nnope\n"},
		{"held prefix that turns out harmless", []string{"abcdefgh\nxyz1"}, []string{"abcd", "efg\n", "nope\n"},
			"abcdefg\nnope\n", "abcdefg\nnope\n"},
		{"trailing partial secret at flush", []string{"abcdef"}, []string{"x abc"},
			"", "x abc"},
		{"no values passes through by line", nil, []string{"one\ntw", "o"},
			"one\n", "one\ntwo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			w := New(tt.values...).Writer(&out)
			for _, s := range tt.writes {
				n, err := w.Write([]byte(s))
				if err != nil || n != len(s) {
					t.Fatalf("Write(%q) = %d, %v", s, n, err)
				}
			}
			if got := out.String(); got != tt.wantBeforeFlush {
				t.Errorf("before Flush: got %q, want %q", got, tt.wantBeforeFlush)
			}
			if err := w.(Flusher).Flush(); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tt.want {
				t.Errorf("after Flush: got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestWriterLongLineStreams(t *testing.T) {
	// Output without newlines must not be held forever, and a secret at the
	// point where it is cut must still be hidden.
	secret := "very-secret-value"
	in := strings.Repeat("x", maxHold-5) + secret + strings.Repeat("y", 10)
	var out bytes.Buffer
	w := New(secret).Writer(&out)
	// One large write that stays under maxHold, then small ones, so that
	// the buffer first exceeds maxHold in the middle of the secret.
	if _, err := w.Write([]byte(in[:maxHold-3])); err != nil {
		t.Fatal(err)
	}
	for rest := in[maxHold-3:]; rest != ""; {
		n := min(3, len(rest))
		if _, err := w.Write([]byte(rest[:n])); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	if out.Len() == 0 {
		t.Fatal("nothing written before Flush for a line longer than maxHold")
	}
	if err := w.(Flusher).Flush(); err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("x", maxHold-5) + Mask + strings.Repeat("y", 10)
	if got := out.String(); got != want {
		t.Errorf("secret leaked or text changed at the cut (len got %d, want %d); contains secret: %v",
			len(got), len(want), strings.Contains(got, secret))
	}
}
