package server

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestCheckModulePath(t *testing.T) {
	for path, ok := range map[string]bool{
		"":                  true,
		".":                 true,
		"basic":             true,
		"./modules/app":     true,
		"modules/../basic":  true,
		"..":                false,
		"../x":              false,
		"a/../../x":         false,
		"/etc":              false,
		"modules/../../etc": false,
	} {
		err := checkModulePath(path)
		if (err == nil) != ok {
			t.Errorf("path %q: error %v, want ok=%v", path, err, ok)
		}
	}
}

// Every errored.tfstate of an extracted tarball goes, whatever it is and
// in whichever module; nothing else does.
func TestRemoveShippedStates(t *testing.T) {
	root := t.TempDir()
	write := func(name string) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(erroredStateFile)
	write("app/" + erroredStateFile)
	write("app/main.tf")
	write("other/" + erroredStateFile + "/inside")
	write("other/errored.tfstate.backup")
	if err := os.MkdirAll(filepath.Join(root, "linked"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../app/main.tf", filepath.Join(root, "linked", erroredStateFile)); err != nil {
		t.Fatal(err)
	}

	removed, err := removeShippedStates(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{erroredStateFile, "app/" + erroredStateFile, "linked/" + erroredStateFile, "other/" + erroredStateFile}
	slices.Sort(removed)
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Fatalf("removed %q, want %q", removed, want)
	}
	for _, gone := range want {
		if _, err := os.Lstat(filepath.Join(root, gone)); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", gone, err)
		}
	}
	for _, kept := range []string{"app/main.tf", "other/errored.tfstate.backup"} {
		if _, err := os.Stat(filepath.Join(root, kept)); err != nil {
			t.Errorf("%s: %v", kept, err)
		}
	}
}
