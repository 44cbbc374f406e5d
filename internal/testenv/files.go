package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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

// Golden compares got with the file at path, or with update writes got
// there instead; a missing file says to run the tests with -update.
func Golden(t testing.TB, path, got string, update bool) {
	t.Helper()
	if update {
		WriteFile(t, path, got)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the tests with -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}

// UnreachableKubeconfig writes to path a kubeconfig whose API server
// nothing listens on (127.0.0.1:1), with a token that is no token: for
// tests of what a client says when it cannot reach its cluster.
func UnreachableKubeconfig(t testing.TB, path string) {
	t.Helper()
	WriteFile(t, path, `apiVersion: v1
kind: Config
clusters:
- name: nowhere
  cluster: {server: "https://127.0.0.1:1"}
contexts:
- name: nowhere
  context: {cluster: nowhere, user: nobody}
current-context: nowhere
users:
- name: nobody
  user: {token: not-a-token}
`)
}
