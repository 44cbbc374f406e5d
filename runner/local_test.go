package runner

import (
	"os"
	"path/filepath"
	"testing"
)

// A local runner's directory goes when it stops, but for a state it kept
// unsaved: that stays where it was, alone.
func TestRemoveRunnerDir(t *testing.T) {
	for _, withState := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "landform-runner-1")
		for _, f := range []string{"tls/tls.key", "work/src-1/main.tf", "work/cli.tfrc"} {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		state := filepath.Join(dir, "work", KeptStateFile)
		if withState {
			if err := os.WriteFile(state, []byte(`{"serial":3}`), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		kept, err := RemoveRunnerDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !withState {
			if _, err := os.Stat(dir); !os.IsNotExist(err) || kept != "" {
				t.Fatalf("without a kept state: dir %v, kept %q", err, kept)
			}
			continue
		}
		if kept != state {
			t.Fatalf("kept %q, want %q", kept, state)
		}
		var left []string
		_ = filepath.Walk(dir, func(p string, info os.FileInfo, _ error) error {
			if !info.IsDir() {
				left = append(left, p)
			}
			return nil
		})
		if len(left) != 1 || left[0] != state {
			t.Fatalf("left %v, want only %s", left, state)
		}
	}
}
