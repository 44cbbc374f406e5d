package engineproc

import (
	"bufio"
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
	"syscall"
	"testing"
	"time"
)

// parentCmd is this test binary started as the launcher of engine with
// args, as terraform-exec starts the runner's binary.
func parentCmd(engine, version string, args ...string) *exec.Cmd {
	return launch(&Launcher{Path: os.Args[0]}, engine, version, args...)
}

// launch is l started as the launcher of engine with args, as
// terraform-exec starts it.
func launch(l *Launcher, engine, version string, args ...string) *exec.Cmd {
	cmd := exec.Command(l.Path, args...)
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for k, v := range l.Environ(env, engine, version) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// launchers are the runner's binary (this test binary) and the script
// handing it apply and destroy.
func launchers(t *testing.T) map[string]*Launcher {
	t.Helper()
	script, err := NewLauncher(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if script.parent == "" {
		t.Fatal("no /bin/sh: the launcher is the runner's binary")
	}
	return map[string]*Launcher{"binary": {Path: os.Args[0]}, "script": script}
}

func TestExitStatusAndOutput(t *testing.T) {
	var stdout, stderr bytes.Buffer
	cmd := parentCmd("/bin/sh", "", "-c", `echo out; echo err >&2; env; exit 3`)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("exit %v, want status 3", err)
	}
	if !strings.HasPrefix(stdout.String(), "out\n") || stderr.String() != "err\n" {
		t.Fatalf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	if strings.Contains(stdout.String(), "LANDFORM_ENGINE_") {
		t.Fatalf("the engine saw the parent's own variables:\n%s", stdout.String())
	}
}

// terraform-exec's version check is answered without the engine.
func TestVersionAnswered(t *testing.T) {
	for name, l := range launchers(t) {
		out, err := launch(l, "/nonexistent/tofu", "1.12.6", "version", "-json").Output()
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
		// Without a known version the engine answers.
		if err := launch(l, "/nonexistent/tofu", "", "version", "-json").Run(); err == nil {
			t.Fatalf("%s: an unknown version was answered without the engine", name)
		}
		// A version that JSON would need to escape is not trusted.
		if err := launch(l, "/nonexistent/tofu", `1"}`, "version", "-json").Run(); err == nil {
			t.Fatalf("%s: a malformed version was answered", name)
		}
	}
}

// A process the engine left behind holding its output does not keep the
// parent, and so terraform-exec's pipes, beyond outputDrain.
func TestOutputHeldByABackgroundProcess(t *testing.T) {
	var stdout bytes.Buffer
	cmd := parentCmd("/bin/sh", "", "-c", `sleep 30 & echo $!; echo done`)
	cmd.Stdout = &stdout
	start := time.Now()
	// Run waits for this test's own pipe too: it ends when the parent
	// exits only if the background process does not hold that pipe.
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	lines := strings.Fields(stdout.String())
	if len(lines) != 2 || lines[1] != "done" {
		t.Fatalf("output %q", stdout.String())
	}
	if pid, err := strconv.Atoi(lines[0]); err == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if took > outputDrain+5*time.Second {
		t.Fatalf("the parent exited %s after the engine: the background process held it", took)
	}
}

// SIGINT to the parent reaches the engine once, which stops as it chooses.
func TestInterruptForwarded(t *testing.T) {
	cmd := parentCmd("/bin/sh", "", "-c", `trap 'echo interrupted; exit 7' INT; echo ready; while :; do sleep 0.1; done`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	if line, _ := r.ReadString('\n'); line != "ready\n" {
		t.Fatalf("engine printed %q", line)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	rest, _ := r.ReadString('\n')
	err = cmd.Wait()
	var exit *exec.ExitError
	if rest != "interrupted\n" || !errors.As(err, &exit) || exit.ExitCode() != 7 {
		t.Fatalf("after SIGINT the engine printed %q and the parent ended with %v, want interrupted and status 7", rest, err)
	}
}

// An engine killed by a signal kills its parent with the same signal.
func TestSignalledEngine(t *testing.T) {
	err := parentCmd("/bin/sh", "", "-c", `kill -TERM $$`).Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("parent ended with %v", err)
	}
	if ws := exit.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("parent ended with %v, want killed by SIGTERM", err)
	}
}

// The kernel kills the engine when its parent dies.
func TestEngineDiesWithItsParent(t *testing.T) {
	cmd := parentCmd("/bin/sh", "", "-c", `echo $$; exec sleep 60`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("engine printed %q", line)
	}
	defer syscall.Kill(pid, syscall.SIGKILL)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("engine %d still running 10s after its parent was killed", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie has ended).
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// For a subcommand that runs no provisioners the launcher becomes the
// engine; apply and destroy run as the runner binary's child.
func TestExecOrChild(t *testing.T) {
	engine := filepath.Join(t.TempDir(), "tofu")
	if err := os.WriteFile(engine, []byte("#!/bin/sh\necho $$ $PPID \"$@\"\nenv\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, l := range launchers(t) {
		t.Run(name, func(t *testing.T) { testExecOrChild(t, l, engine) })
	}
}

func testExecOrChild(t *testing.T, l *Launcher, engine string) {
	for _, tt := range []struct {
		args  []string
		child bool
	}{
		{args: []string{"init", "-no-color"}},
		{args: []string{"plan", "-out=p"}},
		{args: []string{"show", "-json", "p"}},
		{args: []string{"apply", "-auto-approve", "p"}, child: true},
		{args: []string{"destroy", "-auto-approve"}, child: true},
		{args: []string{"console"}, child: true},
	} {
		var stdout bytes.Buffer
		cmd := launch(l, engine, "1.12.6", tt.args...)
		cmd.Stdout = &stdout
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		first, env, _ := strings.Cut(stdout.String(), "\n")
		f := strings.Fields(first)
		if len(f) < 2 || !slices.Equal(f[2:], tt.args) {
			t.Fatalf("%v: the engine printed %q", tt.args, first)
		}
		pid := strconv.Itoa(cmd.Process.Pid)
		if child := f[1] == pid; child != tt.child || !child && f[0] != pid {
			t.Errorf("%v: engine %s, its parent %s, the process started %s: want a child %v", tt.args, f[0], f[1], pid, tt.child)
		}
		if strings.Contains(env, "LANDFORM_ENGINE_") {
			t.Errorf("%v: the engine saw the parent's own variables", tt.args)
		}
	}
}

// The binary's mode comes early only while this package needs nothing of
// the standard library that sorts after the module's own packages and is
// not needed anyway (package comment): strings or slices here put 50 more
// packages' inits before this one's.
func TestImportsKeepTheInitEarly(t *testing.T) {
	allowed := map[string]bool{"os": true, "os/signal": true, "runtime": true, "syscall": true, "time": true}
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
			if path, _ := strconv.Unquote(imp.Path.Value); !allowed[path] {
				t.Errorf("%s imports %s", name, path)
			}
		}
	}
}
