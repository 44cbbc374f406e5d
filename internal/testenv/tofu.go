package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// TofuModule writes module, with a kubernetes backend block for the state
// Landform keeps as secretSuffix in namespace (reached through kubeconfig),
// into a directory of its own, runs `tofu init` there, and returns a
// function that builds tofu commands in it: someone's own tofu against a
// Landform state. Each command gets its own process group, so killing the
// group kills its provisioners too.
func TofuModule(t testing.TB, tofu, kubeconfig, namespace, secretSuffix, module string) func(args ...string) *exec.Cmd {
	t.Helper()
	// The commands run in dir: a relative tofu would be looked for there.
	tofu, err := filepath.Abs(tofu)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	backend := fmt.Sprintf("terraform {\n  backend \"kubernetes\" {\n    secret_suffix = %q\n    namespace     = %q\n    config_path   = %q\n  }\n}\n", secretSuffix, namespace, kubeconfig)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(backend+module), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cli.tfrc"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) *exec.Cmd {
		cmd := exec.Command(tofu, append(args, "-input=false", "-no-color")...)
		cmd.Dir = dir
		// The test's own environment may hold variables that change every
		// command (the runner tests set some that the runner must drop).
		cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+filepath.Join(dir, "cli.tfrc"), "TF_IN_AUTOMATION=1", "HOME="+dir, "CHECKPOINT_DISABLE=1",
			"TF_CLI_ARGS=", "TF_WORKSPACE=")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd
	}
	if out, err := run("init").CombinedOutput(); err != nil {
		t.Fatalf("tofu init: %v\n%s", err, out)
	}
	return run
}
