package server

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/terraform-exec/tfexec"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"

	"github.com/landform-dev/landform/runner/internal/engineproc"
)

// engine is an engine binary (terraform or tofu) that the runner drives
// through terraform-exec, which writes the command lines and checks each
// option against the engine's version. What Landform needs besides is
// added around it: the environment (environment.go); the launcher
// (package engineproc), which terraform-exec starts in the engine's place,
// which becomes the engine, and answers terraform-exec's version check
// when the runner knows the version; and, for apply and destroy, output
// pipes of the runner's own (runWithOwnPipes), so that a process the
// engine leaves behind holding its output cannot hold a run.
//
// terraform-exec asks every new handle (tfexec.Terraform) for the
// version, with a `version -json` process, and has no way to be told it.
// The runner learns the version once per engine instead: from the engine
// binary itself when it can (engineIdentity), else from the first handle's
// check; every later handle's check is then answered by the launcher,
// without an engine process.
type engine struct {
	// path is the engine binary.
	path string
	// product is "OpenTofu" or "Terraform"; empty when the binary does
	// not tell.
	product string
	// launcher is what terraform-exec runs in the engine's place.
	launcher *engineproc.Launcher
	// grace is how long an interrupted engine has to stop (it writes the
	// state and releases the lock on SIGINT) before it is killed.
	grace time.Duration

	mu sync.Mutex
	// version is the engine's version, e.g. "1.12.6"; empty until known.
	version string
	// name is `version`'s first line, for an engine whose product the
	// binary does not tell; empty until read.
	name string
}

// newEngine returns the engine at path, an absolute path.
func newEngine(path string, launcher *engineproc.Launcher, grace time.Duration) (*engine, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	product, version := engineIdentity(path)
	return &engine{path: path, product: product, version: version, launcher: launcher, grace: grace}, nil
}

// terraform returns a terraform-exec handle that runs the engine in dir
// with env. The launcher gets its own variables beside env and removes
// them before it starts the engine.
func (e *engine) terraform(dir string, env map[string]string) (*tfexec.Terraform, error) {
	tf, err := tfexec.NewTerraform(dir, e.launcher.Path)
	if err != nil {
		return nil, err
	}
	if err := tf.SetEnv(e.environ(env, "", "")); err != nil {
		return nil, err
	}
	// On the run's end (deadline, CancelRun, Shutdown) terraform-exec
	// sends the engine SIGINT, and kills it after this delay.
	if err := tf.SetWaitDelay(e.grace); err != nil {
		return nil, err
	}
	return tf, nil
}

// environ is env with the launcher's variables for e, the engine's output
// going to the named pipes stdout and stderr when they are set.
func (e *engine) environ(env map[string]string, stdout, stderr string) map[string]string {
	return e.launcher.Environ(env, engineproc.Command{Engine: e.path, Version: e.knownVersion(), Stdout: stdout, Stderr: stderr})
}

func (e *engine) knownVersion() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.version
}

// learnVersion keeps the version terraform-exec read for tf (its first
// command checked it; reading it again costs no process), for every later
// handle.
func (e *engine) learnVersion(ctx context.Context, tf *tfexec.Terraform) error {
	if e.knownVersion() != "" {
		return nil
	}
	v, _, err := tf.Version(ctx, false)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.version = v.String()
	return nil
}

// displayName names the engine and its version as the first line of
// `version` does, e.g. "OpenTofu v1.12.6" or "Terraform v1.5.7", with the
// version a JSON plan records (planned), else the one the runner knows.
// Only an engine whose binary does not tell which it is costs a `version`
// process, once per runner.
func (e *engine) displayName(ctx context.Context, ws *workspace, planned string) (string, error) {
	if planned == "" {
		planned = e.knownVersion()
	}
	if e.product != "" && planned != "" {
		return e.product + " v" + planned, nil
	}
	e.mu.Lock()
	name := e.name
	e.mu.Unlock()
	if name != "" {
		return name, nil
	}
	out, err := e.versionText(ctx, ws)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(out, "\n")
	e.mu.Lock()
	defer e.mu.Unlock()
	e.name = strings.TrimSpace(line)
	return e.name, nil
}

// versionText is what `version` prints. terraform-exec has no call for
// it (its Version returns the number alone, which does not say whether
// the engine is OpenTofu or Terraform), so the launcher is started here
// as terraform-exec would start it.
func (e *engine) versionText(ctx context.Context, ws *workspace) (string, error) {
	cmd := exec.CommandContext(ctx, e.launcher.Path, "version")
	cmd.Dir = ws.moduleDir
	cmd.Env = envList(e.environ(ws.env, "", ""))
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = e.grace
	out, err := cmd.Output()
	return string(out), err
}

// engineModules are the Go modules the engines are built from.
var engineModules = map[string]string{
	"github.com/opentofu/opentofu":   "OpenTofu",
	"github.com/hashicorp/terraform": "Terraform",
}

// versionedName is an engine binary named with its version, e.g.
// tofu-1.12.6 or terraform_v1.5.7.
var versionedName = regexp.MustCompile(`^(?:tofu|terraform)[-_]v?([0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.]+)?)$`)

// engineIdentity tells the engine and its version from its binary without
// running it: from the Go build information of a binary built from
// OpenTofu's or Terraform's module at a release (as `make tools` and the
// runner image build them; reading it takes well under a millisecond),
// else from its name: tofu* is OpenTofu and terraform* Terraform, at the
// version the name ends with, if it does (tofu-1.12.6). version is empty
// when neither tells it.
func engineIdentity(path string) (product, version string) {
	if bi, err := buildinfo.ReadFile(path); err == nil {
		for _, m := range append([]*debug.Module{&bi.Main}, bi.Deps...) {
			p := engineModules[m.Path]
			if p == "" || (bi.Path != m.Path && !strings.HasPrefix(bi.Path, m.Path+"/")) {
				continue
			}
			if m.Replace != nil {
				m = m.Replace
			}
			if semver.IsValid(m.Version) && !module.IsPseudoVersion(m.Version) {
				return p, strings.TrimPrefix(m.Version, "v")
			}
			return p, ""
		}
	}
	if m := versionedName.FindStringSubmatch(filepath.Base(path)); m != nil {
		version = m[1]
	}
	return engineProduct(path), version
}

// engineProduct tells the engine by its binary's name: OpenTofu for tofu*,
// Terraform for terraform*, "" otherwise.
func engineProduct(binary string) string {
	switch base := filepath.Base(binary); {
	case strings.HasPrefix(base, "tofu"):
		return "OpenTofu"
	case strings.HasPrefix(base, "terraform"):
		return "Terraform"
	}
	return ""
}

// engineExit is an engine command that ran and failed. Its text is what
// the engine wrote to stderr.
type engineExit struct {
	code   int
	stderr string
}

func (e *engineExit) Error() string {
	if msg := strings.TrimSpace(e.stderr); msg != "" {
		return msg
	}
	return fmt.Sprintf("exit status %d", e.code)
}

// engineResult is the outcome of a terraform-exec call: the context's
// error when it ended (the engine was interrupted), an *engineExit when
// the engine failed (terraform-exec returns its exit error followed by its
// stderr, and no error types of its own for what the engine said), else
// err as it is.
func engineResult(ctx context.Context, err error) error {
	var exit *exec.ExitError
	if err != nil && errors.As(err, &exit) {
		return engineResultWith(ctx, err, strings.TrimPrefix(err.Error(), exit.Error()+"\n"))
	}
	return engineResultWith(ctx, err, "")
}

// engineResultWith is engineResult for a command whose stderr the runner
// read itself.
func engineResultWith(ctx context.Context, err error, stderr string) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return &engineExit{code: exit.ExitCode(), stderr: plainText(stderr)}
	}
	return err
}

// colour matches the engine's colour codes.
var colour = regexp.MustCompile("\x1b\\[[0-9;]*m")

// plainText is the engine's text as -no-color prints it: terraform-exec
// passes -no-color to most commands but not to `state push` (StatePush),
// whose diagnostics come coloured and framed ("╷", "│ ", "╵").
func plainText(text string) string {
	text = colour.ReplaceAllString(text, "")
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		switch line = strings.TrimRight(line, " "); {
		case line == "╷" || line == "╵" || line == "│":
			lines[i] = ""
		case strings.HasPrefix(line, "│ "):
			lines[i] = strings.TrimPrefix(line, "│ ")
		}
	}
	return strings.Join(lines, "\n")
}
