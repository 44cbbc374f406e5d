package engineproc

import (
	"os"
	"runtime"
)

// Launcher is what terraform-exec runs in the engine's place.
type Launcher struct {
	// Path is the program: the launcher script, or the runner's binary.
	Path string
}

// Command is what a launcher runs.
type Command struct {
	// Engine is the engine binary.
	Engine string
	// Version is the engine's version; empty when the runner does not
	// know it.
	Version string
	// Stdout and Stderr are where the engine writes its output, both or
	// neither set; empty: the launcher's own (terraform-exec's pipes).
	Stdout, Stderr string
}

// scriptName is the launcher script's name in the runner's directory.
const scriptName = "engine-launcher"

// NewLauncher returns the launcher of a runner whose private directory is
// dir: a script written there when /bin/sh can run it, else the runner's
// own binary.
func NewLauncher(dir string) (*Launcher, error) {
	if fi, err := os.Stat("/bin/sh"); err != nil || fi.Mode()&0o111 == 0 {
		self, err := ownBinary()
		if err != nil {
			return nil, err
		}
		return &Launcher{Path: self}, nil
	}
	path := dir + string(os.PathSeparator) + scriptName
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		return nil, err
	}
	// A file left by an earlier runner keeps its mode.
	if err := os.Chmod(path, 0o700); err != nil {
		return nil, err
	}
	return &Launcher{Path: path}, nil
}

// Environ returns env, less any of the launcher's variables, with those
// that make the launcher run c.
func (l *Launcher) Environ(env map[string]string, c Command) map[string]string {
	out := make(map[string]string, len(env)+len(launcherVars))
	for k, v := range env {
		out[k] = v
	}
	for _, name := range launcherVars {
		delete(out, name)
	}
	out[EnvEngine] = c.Engine
	if plainVersion(c.Version) {
		out[EnvVersion] = c.Version
	}
	if c.Stdout != "" && c.Stderr != "" {
		out[EnvStdout], out[EnvStderr] = c.Stdout, c.Stderr
	}
	return out
}

// ownBinary is the runner's binary, the one running now even if its file
// was replaced since.
func ownBinary() (string, error) {
	if runtime.GOOS == "linux" {
		return "/proc/self/exe", nil
	}
	return os.Executable()
}

// script is the launcher script: what the runner's binary does as a
// launcher (see init), for the cost of a /bin/sh start instead of the
// runner's.
const script = `#!/bin/sh
# Written by the Landform runner (runner/internal/engineproc): terraform-exec
# runs this in the engine's place.
if [ "$#" = 2 ] && [ "$1" = version ] && [ "$2" = -json ] && [ -n "$` + EnvVersion + `" ]; then
	printf '{"terraform_version":"%s","provider_selections":{}}\n' "$` + EnvVersion + `"
	exit
fi
engine=$` + EnvEngine + ` stdout=$` + EnvStdout + ` stderr=$` + EnvStderr + `
unset ` + EnvEngine + ` ` + EnvVersion + ` ` + EnvStdout + ` ` + EnvStderr + `
if [ -n "$stdout" ]; then
	exec "$engine" "$@" >"$stdout" 2>"$stderr"
fi
exec "$engine" "$@"
`
