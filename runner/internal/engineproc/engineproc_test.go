package engineproc

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// launchers are the launcher script and the runner's binary (this test
// binary, which links the package and so has its init).
func launchers(t *testing.T) map[string]*Launcher {
	t.Helper()
	script, err := NewLauncher(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if script.Path == os.Args[0] || !strings.HasSuffix(script.Path, scriptName) {
		t.Fatalf("launcher %s, want the script: is /bin/sh missing?", script.Path)
	}
	return map[string]*Launcher{"script": script, "binary": {Path: os.Args[0]}}
}

// launch is l started as terraform-exec starts it, to run c with args.
func launch(l *Launcher, c Command, args ...string) *exec.Cmd {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	cmd := exec.Command(l.Path, args...)
	for k, v := range l.Environ(env, c) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// engineScript is an engine that prints its pid, its arguments and its
// environment, writes to stderr and exits 3.
func engineScript(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tofu")
	if err := os.WriteFile(path, []byte("#!/bin/sh\necho $$ \"$@\"\necho err >&2\nenv\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// The launcher becomes the engine: the same process, with the arguments,
// the exit status, the output and the environment less the launcher's
// variables.
func TestLauncherBecomesTheEngine(t *testing.T) {
	engine := engineScript(t)
	for name, l := range launchers(t) {
		for _, args := range [][]string{{"apply", "-auto-approve", "-input=false", "p lan"}, {"version", "-json"}, {}} {
			var stdout, stderr bytes.Buffer
			// The version is not known: the engine answers `version -json`.
			cmd := launch(l, Command{Engine: engine}, args...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 3 {
				t.Fatalf("%s %q: %v, want exit status 3", name, args, err)
			}
			first, env, _ := strings.Cut(stdout.String(), "\n")
			if want := strings.Join(append([]string{strconv.Itoa(cmd.Process.Pid)}, args...), " "); first != want {
				t.Errorf("%s %q: the engine printed %q, want %q (the launcher's own pid)", name, args, first, want)
			}
			if stderr.String() != "err\n" {
				t.Errorf("%s %q: stderr %q", name, args, stderr.String())
			}
			if strings.Contains(env, "LANDFORM_ENGINE_") {
				t.Errorf("%s %q: the engine saw the launcher's variables:\n%s", name, args, env)
			}
		}
	}
}

// terraform-exec's version check is answered without the engine when the
// version is known.
func TestLauncherAnswersTheVersion(t *testing.T) {
	for name, l := range launchers(t) {
		out, err := launch(l, Command{Engine: "/nonexistent/tofu", Version: "1.12.6"}, "version", "-json").Output()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var v struct {
			Version   string            `json:"terraform_version"`
			Providers map[string]string `json:"provider_selections"`
		}
		if err := json.Unmarshal(out, &v); err != nil || v.Version != "1.12.6" || v.Providers == nil {
			t.Fatalf("%s: version -json printed %s (%v)", name, out, err)
		}
		// Anything else goes to the engine, and so does a version that
		// JSON would need escaped.
		for _, c := range []struct {
			version string
			args    []string
		}{{"1.12.6", []string{"version"}}, {"1.12.6", []string{"init"}}, {`1"}`, []string{"version", "-json"}}} {
			if err := launch(l, Command{Engine: "/nonexistent/tofu", Version: c.version}, c.args...).Run(); err == nil {
				t.Fatalf("%s: %q with version %q was answered without the engine", name, c.args, c.version)
			}
		}
	}
}

// Given files (the runner gives named pipes), the engine writes its output
// there, and nothing to the launcher's own stdout and stderr.
func TestLauncherRedirectsTheOutput(t *testing.T) {
	engine := engineScript(t)
	for name, l := range launchers(t) {
		dir := t.TempDir()
		c := Command{Engine: engine, Stdout: filepath.Join(dir, "out"), Stderr: filepath.Join(dir, "err")}
		for _, f := range []string{c.Stdout, c.Stderr} {
			if err := os.WriteFile(f, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		var stdout, stderr bytes.Buffer
		cmd := launch(l, c, "apply")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err == nil {
			t.Fatalf("%s: the engine's exit status 3 was lost", name)
		}
		out, _ := os.ReadFile(c.Stdout)
		errOut, _ := os.ReadFile(c.Stderr)
		if !strings.HasPrefix(string(out), strconv.Itoa(cmd.Process.Pid)+" apply\n") || string(errOut) != "err\n" {
			t.Errorf("%s: the engine wrote %q and %q", name, out, errOut)
		}
		if stdout.Len()+stderr.Len() > 0 {
			t.Errorf("%s: the launcher's own output got %q and %q", name, stdout.String(), stderr.String())
		}
	}
}

// The runner binary's init comes early only while this package needs no
// more of the standard library than os and syscall (see the package
// comment): strings or slices here put 50 more packages' inits first.
func TestImportsKeepTheInitEarly(t *testing.T) {
	allowed := []string{"os", "runtime", "syscall"}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); !slices.Contains(allowed, path) {
				t.Errorf("%s imports %s", name, path)
			}
		}
	}
}
