package server

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLineWriter(t *testing.T) {
	var got []string
	w := &lineWriter{emit: func(l string) { got = append(got, l) }}
	for _, p := range []string{"first li", "ne\r\nsecond\n\nthi", "rd"} {
		if n, err := w.Write([]byte(p)); err != nil || n != len(p) {
			t.Fatalf("write: %d, %v", n, err)
		}
	}
	w.flush()
	if diff := cmp.Diff([]string{"first line", "second", "", "third"}, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}

	got = nil
	w.Write([]byte(strings.Repeat("x", maxLogLine+10) + "\n"))
	if len(got) != 2 || len(got[0]) != maxLogLine || len(got[1]) != 10 {
		t.Fatalf("a long line was not split: %d parts", len(got))
	}
}
