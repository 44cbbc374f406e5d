package gitserver

import (
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var modules = filepath.Join("..", "..", "..", "modules")

// TestCloneSeededRepository clones, with the real git client, a repository
// seeded from this repository's modules/: what source-controller does in
// the e2e suites. The server is read-only.
func TestCloneSeededRepository(t *testing.T) {
	seed := t.TempDir()
	mustRun(t, "", "cp", "-r", modules, seed)
	root := t.TempDir()
	if err := Seed(root, "landform", seed); err != nil {
		t.Fatal(err)
	}
	// Seeding again keeps the repository (and its revision).
	head := revParse(t, filepath.Join(root, "landform.git"))
	if err := Seed(root, "landform", t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if again := revParse(t, filepath.Join(root, "landform.git")); again != head {
		t.Errorf("seeding an existing repository changed main from %s to %s", head, again)
	}

	url := serve(t, root, false)

	clone := filepath.Join(t.TempDir(), "clone")
	mustRun(t, "", "git", "clone", "--quiet", "--branch=main", url+"/landform.git", clone)
	assertSameFile(t, filepath.Join(modules, "file", "main.tf"), filepath.Join(clone, "modules", "file", "main.tf"))

	// Read-only: a push is refused.
	mustRun(t, clone, "git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "--quiet", "--allow-empty", "-m", "x")
	push := exec.Command("git", "push", "--quiet", "origin", "main")
	push.Dir = clone
	if out, err := push.CombinedOutput(); err == nil {
		t.Errorf("a push succeeded; want it refused:\n%s", out)
	}
}

// TestSeedPathsAndPush seeds only some paths of a directory (what `landform
// dev` does with this repository's modules/), then pushes a commit and
// clones it again.
func TestSeedPathsAndPush(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"modules/a/main.tf": "# a\n",
		"other/b.txt":       "b\n",
		"top.txt":           "top\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	if err := Seed(root, "repo", dir, "modules"); err != nil {
		t.Fatal(err)
	}
	files := strings.Fields(mustRun(t, "", "git", "--git-dir="+filepath.Join(root, "repo.git"), "ls-tree", "-r", "--name-only", "main"))
	if len(files) != 1 || files[0] != "modules/a/main.tf" {
		t.Fatalf("seeded files %v, want only modules/a/main.tf", files)
	}

	url := serve(t, root, true)
	clone := filepath.Join(t.TempDir(), "clone")
	mustRun(t, "", "git", "clone", "--quiet", url+"/repo.git", clone)
	if err := os.WriteFile(filepath.Join(clone, "modules", "a", "main.tf"), []byte("# changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, clone, "git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "--quiet", "-am", "change")
	mustRun(t, clone, "git", "push", "--quiet", "origin", "main")

	again := filepath.Join(t.TempDir(), "again")
	mustRun(t, "", "git", "clone", "--quiet", url+"/repo.git", again)
	assertSameFile(t, filepath.Join(clone, "modules", "a", "main.tf"), filepath.Join(again, "modules", "a", "main.tf"))
}

// serve serves the repositories under root over HTTP until the test
// ends, taking pushes when push is set, and returns its URL.
func serve(t *testing.T, root string, push bool) string {
	t.Helper()
	h, err := Handler(root, push)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func assertSameFile(t *testing.T, want, got string) {
	t.Helper()
	w, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	g, err := os.ReadFile(got)
	if err != nil {
		t.Fatalf("the clone lacks %s: %v", got, err)
	}
	if string(g) != string(w) {
		t.Errorf("%s differs from %s: %q, want %q", got, want, g, w)
	}
}

func revParse(t *testing.T, gitDir string) string {
	t.Helper()
	return strings.TrimSpace(mustRun(t, "", "git", "--git-dir="+gitDir, "rev-parse", "main"))
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
