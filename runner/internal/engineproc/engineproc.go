// Package engineproc starts the engine for terraform-exec: terraform-exec
// runs a launcher in the engine's place (Launcher.Path), which runs
// terraform or tofu with the same arguments.
//
// terraform-exec writes the command lines, sets the environment, sends
// SIGINT when a command's context ends and kills after its wait delay, and
// on Linux starts its child in a process group of its own with a
// parent-death signal. Two things it cannot do:
//
//   - End a command whose engine has exited while something the engine
//     started (a provisioner's background process) still holds its stdout
//     or stderr: runTerraformCmd reads both pipes to their end before it
//     waits for the process, and no wait delay applies then, so the run
//     would last as long as that process. For apply and destroy, which run
//     provisioners, the engine runs as the child of the runner's own
//     binary (in the mode EnvEngine selects) and writes into pipes of that
//     process, which stops copying them outputDrain after the engine
//     exited and exits itself: terraform-exec's pipes close with it. For
//     the other commands the launcher becomes the engine (exec), as if
//     terraform-exec had started it.
//   - Be told the engine's version: it asks every new handle with a
//     `version -json` process. Given the version (EnvVersion), the
//     launcher answers without the engine.
//
// The launcher is a shell script the runner writes into its directory
// (NewLauncher): it answers and execs for the cost of a /bin/sh start, and
// hands apply and destroy to the runner's binary. Without /bin/sh, the
// runner's binary is the launcher of every command. Measured on the bench
// machine, one object's plan and apply on a fresh local runner (version
// check, init, plan, show, apply, output): 233 ms before terraform-exec,
// 238 ms with the script, 255 ms with the binary alone; a `version -json`
// answer takes 0.8 ms from the script, 2.6 ms from the binary, 40 ms from
// OpenTofu.
//
// The binary's mode is entered from this package's init, so that whatever
// binary links the runner's server (the runner, its tests, the bench) has
// it, and early: this package imports only os, os/signal and syscall of
// the standard library, which puts its init before gRPC's, protobuf's and
// client-go's (23 packages first instead of 119: 1.2 ms less per process).
package engineproc

import (
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
)

// The launcher's variables (Launcher.Environ). The engine sees none of
// them.
const (
	// EnvEngine names the engine binary. Set, it makes the runner's binary
	// a launcher.
	EnvEngine = "LANDFORM_ENGINE_EXEC"
	// EnvVersion is the engine's version (e.g. "1.12.6") when the runner
	// knows it: `version -json` is answered with it, without the engine.
	EnvVersion = "LANDFORM_ENGINE_VERSION"
	// EnvParent is the runner's binary, to which the launcher script hands
	// the commands whose engine runs as a child.
	EnvParent = "LANDFORM_ENGINE_PARENT"
)

// outputDrain is how long the engine's output is still copied after the
// engine exited. Its own output is in the pipe by then and copied at once;
// only a process it left behind holding the pipe makes this wait at all,
// and what such a process writes later is not the engine's.
const outputDrain = 2 * time.Second

// becomesEngine lists the subcommands that run nothing of the module's
// but its providers, which talk to the engine through pipes of their own:
// nothing they leave behind can hold the engine's output. For those the
// launcher becomes the engine (exec), keeping what terraform-exec set up
// for it: its process group, its parent-death signal, its signals. apply
// and destroy run provisioners, and any other subcommand is not known to
// be safe: the engine runs as the runner binary's child.
var becomesEngine = []string{"get", "init", "output", "plan", "providers", "show", "state", "validate", "version", "workspace"}

func init() {
	engine, ok := syscall.Getenv(EnvEngine)
	if !ok {
		return
	}
	version, _ := syscall.Getenv(EnvVersion)
	args := os.Args[1:]
	switch {
	case len(args) == 2 && args[0] == "version" && args[1] == "-json" && plainVersion(version):
		os.Exit(printVersion(version))
	case len(args) > 0 && contains(becomesEngine, args[0]):
		err := syscall.Exec(engine, append([]string{engine}, args...), environ(os.Environ()))
		os.Exit(fail("running the engine", err))
	}
	os.Exit(parent(engine, args))
}

// parent runs engine with args as its child and returns the exit status
// to exit with.
func parent(engine string, args []string) int {
	// Pipes of this process, not its own stdout and stderr: it stops
	// reading them outputDrain after the engine exited (see the package
	// comment).
	var outR, outW, errR, errW *os.File
	var err error
	if outR, outW, err = os.Pipe(); err == nil {
		errR, errW, err = os.Pipe()
	}
	if err != nil {
		return fail("creating the engine's output pipes", err)
	}
	// terraform-exec interrupts this process; the engine is the one that
	// must stop gracefully. Signals that come before it starts wait.
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	// The engine's parent-death signal is tied to the thread that starts
	// it: keep that thread alive as long as the engine.
	runtime.LockOSThread()
	proc, err := os.StartProcess(engine, append([]string{engine}, args...), &os.ProcAttr{
		Env:   environ(os.Environ()),
		Files: []*os.File{os.Stdin, outW, errW},
		Sys:   procAttr(),
	})
	outW.Close()
	errW.Close()
	if err != nil {
		return fail("starting the engine", err)
	}
	go func() {
		for sig := range signals {
			_ = proc.Signal(sig)
		}
	}()
	outDone, errDone := copyOutput(os.Stdout, outR), copyOutput(os.Stderr, errR)
	state, err := proc.Wait()
	if err != nil {
		return fail("waiting for the engine", err)
	}
	drained := time.Now().Add(outputDrain)
	_ = outR.SetReadDeadline(drained)
	_ = errR.SetReadDeadline(drained)
	<-outDone
	<-errDone
	return exitStatus(state)
}

// copyOutput copies r to w until r ends or its read deadline passes.
func copyOutput(w, r *os.File) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				_, _ = w.Write(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	return done
}

func fail(what string, err error) int {
	_, _ = os.Stderr.WriteString("landform-runner: " + what + ": " + err.Error() + "\n")
	return 127
}

// environ is the engine's environment: this process's, less its own
// variables.
func environ(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !hasPrefix(kv, EnvEngine+"=") && !hasPrefix(kv, EnvVersion+"=") && !hasPrefix(kv, EnvParent+"=") {
			out = append(out, kv)
		}
	}
	return out
}

func contains(items []string, item string) bool {
	for _, i := range items {
		if i == item {
			return true
		}
	}
	return false
}

func hasPrefix(s, prefix string) bool {
	return len(s) >= len(prefix) && s[:len(prefix)] == prefix
}

// plainVersion reports whether v is a version that needs no escaping in
// JSON: digits, letters, dots, hyphens and plus signs.
func plainVersion(v string) bool {
	if v == "" {
		return false
	}
	for _, c := range v {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '.' || c == '-' || c == '+') {
			return false
		}
	}
	return true
}

// printVersion writes what `version -json` writes, as far as
// terraform-exec reads it.
func printVersion(version string) int {
	out := `{"terraform_version":"` + version + `","platform":"` + runtime.GOOS + "_" + runtime.GOARCH + `","provider_selections":{}}` + "\n"
	if _, err := os.Stdout.WriteString(out); err != nil {
		return 1
	}
	return 0
}
