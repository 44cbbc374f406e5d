package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// WriteFile writes content to path, creating its directories, or fails the
// test.
func WriteFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// WantIn fails the test, going on, for each of want that text lacks; what
// names text in the message.
func WantIn(t testing.TB, what, text string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}
