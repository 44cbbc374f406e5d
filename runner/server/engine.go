package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// engineCmd runs the engine (terraform or tofu) in one module dir. The
// command lines are written here rather than through terraform-exec, which
// runs `version -json` before its first command to check each option
// against the engine's version: a process per runner for options that
// every supported engine (Terraform ≥ 1.0, OpenTofu) accepts.
type engineCmd struct {
	path string
	dir  string
	env  []string
	// waitDelay is how long an interrupted engine has to stop (it writes
	// the state and releases the lock on SIGINT) before it is killed.
	waitDelay time.Duration
	// stdout and stderr receive the engine's output when set (attachLogs).
	stdout, stderr io.Writer
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
	return "exit status " + strconv.Itoa(e.code)
}

// newEngineCmd returns the engine's handle for dir with env.
func (s *Server) newEngineCmd(dir string, env map[string]string) (*engineCmd, error) {
	if _, err := os.Stat(s.engine); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	return &engineCmd{path: s.engine, dir: dir, env: envList(env), waitDelay: s.interruptGrace}, nil
}

// run runs the engine with args, its stdout also going to stdout when that
// is not nil. When ctx ends, the engine gets SIGINT (terraform then stops
// its operations, writes the state and releases the lock) and is killed
// after waitDelay; it is also killed if the runner dies. A non-zero exit
// is an *engineExit.
func (e *engineCmd) run(ctx context.Context, stdout io.Writer, args ...string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var errText bytes.Buffer
	cmd := exec.CommandContext(ctx, e.path, args...)
	cmd.Dir = e.dir
	cmd.Env = e.env
	cmd.SysProcAttr = engineProcAttr()
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = e.waitDelay
	cmd.Stdout = writers(stdout, e.stdout)
	cmd.Stderr = writers(&errText, e.stderr)
	err := cmd.Run()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return &engineExit{code: exit.ExitCode(), stderr: errText.String()}
	case errors.Is(err, exec.ErrWaitDelay):
		// The engine succeeded; something it started (a provisioner's
		// background process) still held its output open.
		return nil
	}
	return err
}

// writers is io.MultiWriter of the writers that are set.
func writers(ws ...io.Writer) io.Writer {
	var set []io.Writer
	for _, w := range ws {
		if w != nil {
			set = append(set, w)
		}
	}
	if len(set) == 0 {
		return nil
	}
	return io.MultiWriter(set...)
}

// init initialises the module dir: providers, modules and the backend
// (with backendConfig, "key=value" each), reconfigured from scratch.
func (e *engineCmd) init(ctx context.Context, backendConfig []string) error {
	args := []string{"init", "-no-color", "-input=false", "-reconfigure"}
	for _, kv := range backendConfig {
		args = append(args, "-backend-config="+kv)
	}
	return e.run(ctx, nil, args...)
}

// lockFlag is -lock=false when the runner holds the state lock itself.
func lockFlag(locked bool) string {
	return "-lock=" + strconv.FormatBool(!locked)
}

// plan writes a plan file to planPath and reports whether it changes
// anything.
func (e *engineCmd) plan(ctx context.Context, planPath string, destroy, locked bool) (bool, error) {
	args := []string{"plan", "-no-color", "-input=false", "-detailed-exitcode", "-lock-timeout=0s", lockFlag(locked), "-out=" + planPath}
	if destroy {
		args = append(args, "-destroy")
	}
	err := e.run(ctx, nil, args...)
	var exit *engineExit
	if errors.As(err, &exit) && exit.code == 2 {
		return true, nil // -detailed-exitcode: success with changes
	}
	return false, err
}

// showPlan returns `show -json` of a plan file.
func (e *engineCmd) showPlan(ctx context.Context, planPath string) ([]byte, error) {
	var out bytes.Buffer
	if err := e.run(ctx, &out, "show", "-json", "-no-color", planPath); err != nil {
		return nil, err
	}
	if !json.Valid(out.Bytes()) {
		return nil, errors.New("show -json printed no JSON document")
	}
	return out.Bytes(), nil
}

// apply applies a saved plan file.
func (e *engineCmd) apply(ctx context.Context, planPath string, locked bool) error {
	return e.run(ctx, nil, "apply", "-no-color", "-auto-approve", "-input=false", lockFlag(locked), planPath)
}

// destroy destroys everything in the state.
func (e *engineCmd) destroy(ctx context.Context, locked bool) error {
	return e.run(ctx, nil, "destroy", "-no-color", "-auto-approve", "-input=false", "-lock-timeout=0s", lockFlag(locked))
}

// outputMeta is one output of `output -json`.
type outputMeta struct {
	Sensitive bool            `json:"sensitive"`
	Type      json.RawMessage `json:"type"`
	Value     json.RawMessage `json:"value"`
}

// outputs returns `output -json`.
func (e *engineCmd) outputs(ctx context.Context) (map[string]outputMeta, error) {
	var out bytes.Buffer
	if err := e.run(ctx, &out, "output", "-no-color", "-json"); err != nil {
		return nil, err
	}
	metas := map[string]outputMeta{}
	if err := json.Unmarshal(out.Bytes(), &metas); err != nil {
		return nil, fmt.Errorf("decode output -json: %w", err)
	}
	return metas, nil
}

// validate reports whether `validate -json` finds the configuration
// invalid; it exits 1 then, with its verdict on stdout.
func (e *engineCmd) validate(ctx context.Context) (valid bool, err error) {
	var out bytes.Buffer
	runErr := e.run(ctx, &out, "validate", "-no-color", "-json")
	var verdict struct {
		Valid *bool `json:"valid"`
	}
	if json.Unmarshal(out.Bytes(), &verdict) != nil || verdict.Valid == nil {
		if runErr == nil {
			runErr = errors.New("validate -json printed no verdict")
		}
		return false, runErr
	}
	return *verdict.Valid, nil
}

// workspaces lists the terraform workspaces and the selected one.
func (e *engineCmd) workspaces(ctx context.Context) (names []string, current string, err error) {
	var out bytes.Buffer
	if err := e.run(ctx, &out, "workspace", "list", "-no-color"); err != nil {
		return nil, "", err
	}
	names, current = parseWorkspaces(out.String())
	return names, current, nil
}

// parseWorkspaces reads `workspace list`: a name per line, the selected
// one marked with "* ".
func parseWorkspaces(list string) (names []string, current string) {
	lines := bufio.NewScanner(strings.NewReader(list))
	for lines.Scan() {
		line := strings.TrimSpace(lines.Text())
		name, selected := strings.CutPrefix(line, "*")
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if selected {
			current = name
		}
		names = append(names, name)
	}
	return names, current
}

// selectWorkspace selects an existing terraform workspace.
func (e *engineCmd) selectWorkspace(ctx context.Context, name string) error {
	return e.run(ctx, nil, "workspace", "select", "-no-color", name)
}

// newWorkspace creates a terraform workspace and selects it.
func (e *engineCmd) newWorkspace(ctx context.Context, name string) error {
	return e.run(ctx, nil, "workspace", "new", "-no-color", name)
}

// engineVersion names the engine and its version as the first line of
// `version` does, e.g. "OpenTofu v1.12.6" or "Terraform v1.5.7", from the
// version a JSON plan records (planned). Only an engine whose binary name
// does not tell which it is costs a `version` process (once per runner).
func (s *Server) engineVersion(ctx context.Context, ws *workspace, planned string) string {
	if s.engineName != "" {
		return s.engineName
	}
	if product := engineProduct(s.engine); product != "" && planned != "" {
		s.engineName = product + " v" + planned
		return s.engineName
	}
	var out bytes.Buffer
	if err := ws.tf.run(ctx, &out, "version"); err != nil {
		s.log.Info("engine version unknown", "error", err.Error())
		return ""
	}
	line, _, _ := strings.Cut(out.String(), "\n")
	s.engineName = strings.TrimSpace(line)
	return s.engineName
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
