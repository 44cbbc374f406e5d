// Package gitserver serves bare git repositories over smart HTTP by running
// `git http-backend` (from the git on PATH) as a CGI program. Flux's
// source-controller clones only http(s) and ssh URLs, so `landform dev` and
// the end-to-end suites use this instead of a public Git host. It depends on
// the standard library only, so that the e2e-gitserver image stays small.
package gitserver

import (
	"fmt"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// gitConfig is configuration given to every git this package runs, through
// the environment: it keeps git independent of the user's configuration and
// accepts repositories owned by another user (an image's files belong to
// root).
func gitConfig(kv ...string) []string {
	kv = append([]string{"safe.directory", "*"}, kv...)
	env := []string{
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_CONFIG_COUNT=" + strconv.Itoa(len(kv)/2),
	}
	for i := 0; i+1 < len(kv); i += 2 {
		n := strconv.Itoa(i / 2)
		env = append(env, "GIT_CONFIG_KEY_"+n+"="+kv[i], "GIT_CONFIG_VALUE_"+n+"="+kv[i+1])
	}
	return env
}

// Seed creates root/name.git holding one commit, on branch main, of the
// files of dir: all of them, or only those under paths (relative to dir),
// which keep their place in the tree. Files dir's .gitignore files ignore
// are left out. An existing repository is left alone, so a restart keeps its
// revision and whatever was pushed to it.
func Seed(root, name, dir string, paths ...string) error {
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
	if len(paths) == 0 {
		paths = []string{"."}
	}
	steps := [][]string{
		{"init", "--quiet", "--bare", "--initial-branch=main", tmp},
		// The seed directory is the work tree; git writes only into the
		// bare repository, so the seed may be read-only.
		append([]string{"--git-dir=" + tmp, "--work-tree=" + dir, "add", "--all", "--"}, paths...),
		{"--git-dir=" + tmp, "--work-tree=" + dir, "-c", "user.name=landform", "-c", "user.email=landform@landform.invalid",
			"commit", "--quiet", "--message=seed " + name},
	}
	for _, args := range steps {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), gitConfig()...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("seeding %s from %s: git %v: %w\n%s", name, dir, args, err, out)
		}
	}
	return os.Rename(tmp, repo)
}

// Handler serves the bare repositories under root. Pushes are refused
// unless push is true: http-backend disables receive-pack for
// unauthenticated requests unless http.receivepack is set.
func Handler(root string, push bool) (http.Handler, error) {
	git, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("git http-backend needs git on PATH: %w", err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	var config []string
	if push {
		config = []string{"http.receivepack", "true"}
	}
	backend := &cgi.Handler{
		Path: git,
		Args: []string{"http-backend"},
		Env: append([]string{
			"GIT_PROJECT_ROOT=" + abs,
			"GIT_HTTP_EXPORT_ALL=1",
		}, gitConfig(config...)...),
		InheritEnv: []string{"PATH", "HOME"},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.Handle("/", backend)
	return mux, nil
}
