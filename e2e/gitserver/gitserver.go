package main

import (
	"fmt"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
)

// gitEnv keeps git independent of the user's configuration, and accepts
// repositories owned by another user (an image's files belong to root).
func gitEnv() []string {
	return []string{
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_CONFIG_COUNT=1",
		"GIT_CONFIG_KEY_0=safe.directory",
		"GIT_CONFIG_VALUE_0=*",
	}
}

// Seed creates root/name.git holding one commit of dir's files on branch
// main. An existing repository is left alone, so a restart keeps its
// revision.
func Seed(root, name, dir string) error {
	repo := filepath.Join(root, name+".git")
	if _, err := os.Stat(filepath.Join(repo, "HEAD")); err == nil {
		return nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(root, "."+name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	steps := [][]string{
		{"init", "--quiet", "--bare", "--initial-branch=main", tmp},
		// The seed directory is the work tree; git writes only into the
		// bare repository, so the seed may be read-only.
		{"--git-dir=" + tmp, "--work-tree=" + dir, "add", "--all", "."},
		{"--git-dir=" + tmp, "--work-tree=" + dir, "-c", "user.name=landform-e2e", "-c", "user.email=e2e@landform.invalid",
			"commit", "--quiet", "--message=seed " + name},
	}
	for _, args := range steps {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), gitEnv()...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("seeding %s from %s: git %v: %w\n%s", name, dir, args, err, out)
		}
	}
	return os.Rename(tmp, repo)
}

// Handler serves the bare repositories under root, read-only.
func Handler(root string) (http.Handler, error) {
	git, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("git http-backend needs git on PATH: %w", err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	backend := &cgi.Handler{
		Path: git,
		Args: []string{"http-backend"},
		Env: append([]string{
			"GIT_PROJECT_ROOT=" + abs,
			"GIT_HTTP_EXPORT_ALL=1",
		}, gitEnv()...),
		InheritEnv: []string{"PATH", "HOME"},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	// Pushes are refused: http-backend disables receive-pack for
	// unauthenticated requests unless http.receivepack is set.
	mux.Handle("/", backend)
	return mux, nil
}
