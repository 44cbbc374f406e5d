package source

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestModulePath(t *testing.T) {
	outside := t.TempDir()
	dir := t.TempDir()
	for _, d := range []string{"modules/db", "modules/shared"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"out-abs":         outside,
		"modules/out-rel": "../../" + filepath.Base(outside),
		"modules/in":      "shared",
		"dangling":        "/nonexistent-landform-test",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	// modules/out-rel only escapes if outside is dir's sibling.
	if filepath.Dir(outside) != filepath.Dir(dir) {
		t.Fatalf("test assumes sibling temp dirs: %s, %s", outside, dir)
	}

	tests := []struct {
		path    string
		wantRel string
		wantErr string // substring; empty means success
	}{
		{"", ".", ""},
		{".", ".", ""},
		{"./", ".", ""},
		{"/", ".", ""},
		{"modules/db", "modules/db", ""},
		{"./modules/db/", "modules/db", ""},
		{"/modules/db", "modules/db", ""},
		{"modules/../modules/db", "modules/db", ""},
		{"modules/in", "modules/in", ""},
		{"..", "", "must stay inside"},
		{"../x", "", "must stay inside"},
		{"modules/../../x", "", "must stay inside"},
		{"/../../etc", "", "must stay inside"},
		{"out-abs", "", "must stay inside"},
		{"modules/out-rel", "", "must stay inside"},
		{"missing", "", "does not exist"},
		{"dangling", "", "does not exist"},
		{"main.tf", "", "not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rel, abs, err := ModulePath(dir, tt.path)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrInvalidPath) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want ErrInvalidPath containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rel != tt.wantRel {
				t.Errorf("rel = %q, want %q", rel, tt.wantRel)
			}
			if want := filepath.Join(dir, tt.wantRel); abs != want {
				t.Errorf("abs = %q, want %q", abs, want)
			}
		})
	}
}
