package testenv

import (
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
