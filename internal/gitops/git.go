// Package gitops drives Landform the GitOps way, as the walkthrough
// (`make demo`) and the end-to-end suite (e2e/flux) do: a clone of a git
// repository that commits and pushes, and Flux Kustomizations handled as
// unstructured objects (Landform's clients carry no kustomize-controller
// scheme).
package gitops

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Workdir is a clone of a git repository.
type Workdir struct {
	// Dir is the work tree.
	Dir string
}

// Clone clones url into a new temporary directory; Remove deletes it.
func Clone(url string) (*Workdir, error) {
	dir, err := os.MkdirTemp("", "landform-git-")
	if err != nil {
		return nil, err
	}
	w := &Workdir{Dir: dir}
	if err := w.git("clone", "--quiet", url, "."); err != nil {
		w.Remove()
		return nil, err
	}
	return w, nil
}

// CommitAndPush writes files (path → content), deletes the paths in
// remove, commits everything and pushes it to main. It returns the commit.
func (w *Workdir) CommitAndPush(message string, files map[string]string, remove ...string) (string, error) {
	return w.CommitAndPushTo("refs/heads/main", message, files, remove...)
}

// CommitAndPushTo is CommitAndPush to ref, a branch or any other ref (a
// forge's refs/pull/<n>/head).
func (w *Workdir) CommitAndPushTo(ref, message string, files map[string]string, remove ...string) (string, error) {
	for path, content := range files {
		full := filepath.Join(w.Dir, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	for _, path := range remove {
		if err := os.Remove(filepath.Join(w.Dir, path)); err != nil {
			return "", err
		}
	}
	for _, args := range [][]string{
		{"add", "--all"},
		{"-c", "user.name=Landform", "-c", "user.email=landform@landform.invalid", "commit", "--quiet", "-m", message},
		{"push", "--quiet", "origin", "HEAD:" + ref},
	} {
		if err := w.git(args...); err != nil {
			return "", err
		}
	}
	return w.Head()
}

// Head is the commit the work tree is at.
func (w *Workdir) Head() (string, error) {
	cmd := exec.Command("git", "-C", w.Dir, "rev-parse", "HEAD")
	cmd.Env = gitEnv()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git rev-parse HEAD: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Remove deletes the work tree.
func (w *Workdir) Remove() { _ = os.RemoveAll(w.Dir) }

func (w *Workdir) git(args ...string) error {
	cmd := exec.Command("git", append([]string{"-C", w.Dir}, args...)...)
	cmd.Env = gitEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// gitEnv keeps the user's git configuration (signing, hooks, credential
// helpers) out of these commits and never prompts.
func gitEnv() []string {
	return append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
}
