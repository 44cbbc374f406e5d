package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/landform-dev/landform/runner"
)

// Flags that cannot work are refused before anything is built, with the
// flag named.
func TestNewManagerRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		want string
	}{
		{"jitter", Config{IntervalJitterPercentage: 100}, "--interval-jitter-percentage=100: must be below 100"},
		{"selector", Config{WatchLabelSelector: "a in (b"}, `--watch-label-selector="a in (b" is not a valid label selector`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewManager(context.Background(), &rest.Config{Host: "https://127.0.0.1:1"}, tc.c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// Detached local runners outlive the controller, so their CA is kept in
// the work dir, readable by its owner only, and the next process loads
// the same one; runners that end with the process get a fresh one.
func TestLocalCA(t *testing.T) {
	dir := t.TempDir()
	c := Config{WorkDir: dir, Local: runner.LocalOptions{Detach: true}}
	first, err := localCA(c)
	if err != nil {
		t.Fatal(err)
	}
	second, err := localCA(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(first.CertPEM()) != string(second.CertPEM()) {
		t.Error("a restarted controller made another CA: it could not dial its detached runners")
	}
	fi, err := os.Stat(filepath.Join(dir, "runner-ca", "ca.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the CA key: %v, mode %v", err, fi.Mode())
	}
	c.Local.Detach = false
	fresh, err := localCA(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(fresh.CertPEM()) == string(first.CertPEM()) {
		t.Error("runners that end with the process share the kept CA")
	}

	if err := os.WriteFile(filepath.Join(dir, "runner-ca", "ca.key"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.Local.Detach = true
	if _, err := localCA(c); err == nil || !strings.Contains(err.Error(), "remove it to start afresh") {
		t.Fatalf("a damaged CA: %v", err)
	}
}
