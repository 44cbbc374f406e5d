package main

import (
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCloneSeededRepository clones, with the real git client, a repository
// seeded from this repository's modules/: what source-controller does in
// the e2e suites.
func TestCloneSeededRepository(t *testing.T) {
	seed := t.TempDir()
	mustRun(t, "", "cp", "-r", filepath.Join("..", "..", "modules"), seed)
	root := t.TempDir()
	if err := Seed(root, "landform", seed); err != nil {
		t.Fatal(err)
	}
	// Seeding again keeps the repository (and its revision).
	head := strings.TrimSpace(mustRun(t, "", "git", "--git-dir="+filepath.Join(root, "landform.git"), "rev-parse", "main"))
	if err := Seed(root, "landform", t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if again := strings.TrimSpace(mustRun(t, "", "git", "--git-dir="+filepath.Join(root, "landform.git"), "rev-parse", "main")); again != head {
		t.Errorf("seeding an existing repository changed main from %s to %s", head, again)
	}

	h, err := Handler(root)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	clone := filepath.Join(t.TempDir(), "clone")
	mustRun(t, "", "git", "clone", "--quiet", "--branch=main", srv.URL+"/landform.git", clone)
	want, err := os.ReadFile(filepath.Join("..", "..", "modules", "file", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(clone, "modules", "file", "main.tf"))
	if err != nil {
		t.Fatalf("the clone lacks modules/file/main.tf: %v", err)
	}
	if string(got) != string(want) {
		t.Errorf("modules/file/main.tf differs in the clone")
	}

	// Read-only: a push is refused.
	mustRun(t, clone, "git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "--quiet", "--allow-empty", "-m", "x")
	push := exec.Command("git", "push", "--quiet", "origin", "main")
	push.Dir = clone
	if out, err := push.CombinedOutput(); err == nil {
		t.Errorf("a push succeeded; want it refused:\n%s", out)
	}
}

func mustRun(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}
