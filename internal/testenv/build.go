package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// RunnerBinary is the landform-runner a suite starts in-process or as
// local runners: $LANDFORM_RUNNER_BIN when set (make builds it), else one
// built from this checkout into dir.
func RunnerBinary(dir string) (string, error) {
	if p := os.Getenv("LANDFORM_RUNNER_BIN"); p != "" {
		return p, nil
	}
	bin := filepath.Join(dir, "landform-runner")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/runner")
	cmd.Dir = repoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the runner: %w\n%s", err, out)
	}
	return bin, nil
}

// BuildProviderMirror builds the landform test provider into a filesystem
// mirror at dir (hack/build-provider.sh).
func BuildProviderMirror(dir string) error {
	if out, err := exec.Command(filepath.Join(repoRoot(), "hack", "build-provider.sh"), dir).CombinedOutput(); err != nil {
		return fmt.Errorf("building the test provider: %w\n%s", err, out)
	}
	return nil
}

// BuildAt builds landform-controller and landform-runner as they were at
// git revision rev of this repository, for a test that upgrades a
// controller over what an earlier one made, and returns their paths. They
// are built once per revision into the tools cache
// (~/.cache/landform/upgrade/<rev>). The source comes from `git archive`
// of this clone: ErrNoRevision when the clone lacks rev (a shallow clone),
// which such a test skips on, saying so.
func BuildAt(rev string) (controller, runner string, err error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", "", err
	}
	dir := filepath.Join(cache, "landform", "upgrade", rev)
	controller, runner = filepath.Join(dir, "landform-controller"), filepath.Join(dir, "landform-runner")
	_, cerr := os.Stat(controller)
	if _, rerr := os.Stat(runner); cerr == nil && rerr == nil {
		return controller, runner, nil
	}
	root := repoRoot()
	if err := exec.Command("git", "-C", root, "cat-file", "-e", rev+"^{commit}").Run(); err != nil {
		return "", "", fmt.Errorf("%w: %s is not in this clone", ErrNoRevision, rev)
	}
	src, err := os.MkdirTemp("", "landform-"+rev+"-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(src)
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, rev, src)
	if out, err := archive.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("extracting %s: %w\n%s", rev, err, out)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	for bin, pkg := range map[string]string{controller: "./cmd/controller", runner: "./cmd/runner"} {
		cmd := exec.Command("go", "build", "-o", bin+".tmp", pkg)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("building %s at %s: %w\n%s", pkg, rev, err, out)
		}
		if err := os.Rename(bin+".tmp", bin); err != nil {
			return "", "", err
		}
	}
	return controller, runner, nil
}

// ErrNoRevision: the clone lacks the revision BuildAt was asked for.
var ErrNoRevision = errors.New("revision not in this clone")
