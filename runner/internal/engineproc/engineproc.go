// Package engineproc starts the engine for terraform-exec: terraform-exec
// runs a launcher in the engine's place (Launcher.Path), which becomes
// terraform or tofu (exec) with the same arguments. The engine is then
// the process terraform-exec started, in the process group and with the
// parent-death signal terraform-exec gave it, and gets its signals.
//
// The launcher does what terraform-exec cannot do:
//
//   - Be told the engine's version: terraform-exec asks every new handle
//     with a `version -json` process. Given the version (EnvVersion), the
//     launcher answers without the engine.
//   - Give the engine other pipes for its output (EnvStdout, EnvStderr):
//     terraform-exec reads its own to their end before it waits for the
//     process, with no wait delay then, so a process the engine leaves
//     behind holding them (a provisioner's daemon) would hold the run as
//     long as it lives. The runner gives an apply or a destroy named pipes
//     of its own, which it stops reading shortly after the engine exited.
//
// The launcher is a shell script the runner writes into its directory
// (NewLauncher), else, without /bin/sh, the runner's own binary, which
// becomes a launcher in this package's init when EnvEngine is set. Both
// cost a process start before the engine's: measured on the bench machine
// against /bin/true alone (0.8 ms), /bin/true through the script takes
// 1.8 ms and through the runner's binary 3.4 ms (its `version -json`
// answer 0.8 ms and 2.6 ms, OpenTofu's own 40 ms). The binary's init is
// early because this package imports only os and syscall of the standard
// library: before gRPC's, protobuf's and client-go's, 1.2 ms sooner.
package engineproc

import (
	"os"
	"syscall"
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
	// EnvStdout and EnvStderr name the named pipes (or files) the engine
	// writes its stdout and stderr to, instead of the launcher's own.
	EnvStdout = "LANDFORM_ENGINE_STDOUT"
	EnvStderr = "LANDFORM_ENGINE_STDERR"
)

var launcherVars = []string{EnvEngine, EnvVersion, EnvStdout, EnvStderr}

func init() {
	engine, ok := syscall.Getenv(EnvEngine)
	if !ok {
		return
	}
	version, _ := syscall.Getenv(EnvVersion)
	args := os.Args[1:]
	if len(args) == 2 && args[0] == "version" && args[1] == "-json" && plainVersion(version) {
		os.Exit(printVersion(version))
	}
	for fd, name := range map[int]string{1: EnvStdout, 2: EnvStderr} {
		if path, ok := syscall.Getenv(name); ok {
			if err := redirect(fd, path); err != nil {
				os.Exit(fail("opening "+path+" for the engine's output", err))
			}
		}
	}
	err := syscall.Exec(engine, append([]string{engine}, args...), environ(os.Environ()))
	os.Exit(fail("running the engine "+engine, err))
}

func fail(what string, err error) int {
	_, _ = os.Stderr.WriteString("landform-runner: " + what + ": " + err.Error() + "\n")
	return 127
}

// environ is the engine's environment: this process's, less the
// launcher's variables.
func environ(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !launcherVar(kv) {
			out = append(out, kv)
		}
	}
	return out
}

func launcherVar(kv string) bool {
	for _, name := range launcherVars {
		if len(kv) > len(name) && kv[:len(name)] == name && kv[len(name)] == '=' {
			return true
		}
	}
	return false
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
	if _, err := os.Stdout.WriteString(`{"terraform_version":"` + version + `","provider_selections":{}}` + "\n"); err != nil {
		return 1
	}
	return 0
}
