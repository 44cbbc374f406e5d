package demo

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// gitWorkdir is a clone of the dev git server's repository.
type gitWorkdir struct {
	dir string
}

// cloneRepo clones url into a temporary directory.
func cloneRepo(url string) (*gitWorkdir, error) {
	dir, err := os.MkdirTemp("", "landform-demo-")
	if err != nil {
		return nil, err
	}
	g := &gitWorkdir{dir: dir}
	if err := g.git("clone", "--quiet", url, "."); err != nil {
		g.remove()
		return nil, err
	}
	return g, nil
}

// commitAndPush writes files (path → content), commits and pushes them.
func (g *gitWorkdir) commitAndPush(message string, files map[string]string) error {
	for path, content := range files {
		full := filepath.Join(g.dir, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{
		{"add", "--all"},
		{"-c", "user.name=Landform demo", "-c", "user.email=demo@landform.invalid", "commit", "--quiet", "-m", message},
		{"push", "--quiet", "origin", "HEAD:main"},
	} {
		if err := g.git(args...); err != nil {
			return err
		}
	}
	return nil
}

// head is the commit the work tree is at.
func (g *gitWorkdir) head() (string, error) {
	out, err := exec.Command("git", "-C", g.dir, "rev-parse", "HEAD").Output()
	return strings.TrimSpace(string(out)), err
}

func (g *gitWorkdir) git(args ...string) error {
	cmd := exec.Command("git", append([]string{"-C", g.dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (g *gitWorkdir) remove() { _ = os.RemoveAll(g.dir) }
