package engineproc

import (
	"os"
	"runtime"
)

// Launcher is what terraform-exec runs in the engine's place.
type Launcher struct {
	// Path is the program: the launcher script, or the runner's binary.
	Path string
	// parent is the runner's binary when Path is the script.
	parent string
}

// scriptName is the launcher script's name in the runner's directory.
const scriptName = "engine-launcher"

// NewLauncher returns the launcher of a runner whose private directory is
// dir: a script written there when /bin/sh can run it, else the runner's
// own binary.
func NewLauncher(dir string) (*Launcher, error) {
	self, err := ownBinary()
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat("/bin/sh"); err != nil || fi.Mode()&0o111 == 0 {
		return &Launcher{Path: self}, nil
	}
	path := dir + string(os.PathSeparator) + scriptName
	if err := os.WriteFile(path, []byte(script()), 0o700); err != nil {
		return nil, err
	}
	// A file left by an earlier runner keeps its mode.
	if err := os.Chmod(path, 0o700); err != nil {
		return nil, err
	}
	return &Launcher{Path: path, parent: self}, nil
}

// Environ returns env for a launcher of engine at version ("" when
// unknown): env with the launcher's variables set, and none of them
// otherwise.
func (l *Launcher) Environ(env map[string]string, engine, version string) map[string]string {
	out := make(map[string]string, len(env)+3)
	for k, v := range env {
		if k != EnvEngine && k != EnvVersion && k != EnvParent {
			out[k] = v
		}
	}
	out[EnvEngine] = engine
	if plainVersion(version) {
		out[EnvVersion] = version
	}
	if l.parent != "" {
		out[EnvParent] = l.parent
	}
	return out
}

// ownBinary is the runner's binary, the one running now even if its file
// was replaced since.
func ownBinary() (string, error) {
	if runtime.GOOS != "linux" {
		return os.Executable()
	}
	pid := os.Getpid()
	digits := ""
	for ; pid > 0; pid /= 10 {
		digits = string(rune('0'+pid%10)) + digits
	}
	return "/proc/" + digits + "/exe", nil
}

// script is the launcher script: what the runner's binary does as a
// launcher (see init), but for the commands whose engine runs as a child,
// which it hands to that binary.
func script() string {
	return `#!/bin/sh
# Written by the Landform runner (runner/internal/engineproc): terraform-exec
# runs this in the engine's place.
if [ "$#" = 2 ] && [ "$1" = version ] && [ "$2" = -json ] && [ -n "$` + EnvVersion + `" ]; then
	printf '{"terraform_version":"%s","provider_selections":{}}\n' "$` + EnvVersion + `"
	exit
fi
case "$1" in
` + join(becomesEngine, "|") + `)
	engine=$` + EnvEngine + `
	unset ` + EnvEngine + ` ` + EnvVersion + ` ` + EnvParent + `
	exec "$engine" "$@"
	;;
esac
exec "$` + EnvParent + `" "$@"
`
}

// join is strings.Join, which this package does without (see the package
// comment).
func join(items []string, sep string) string {
	out := ""
	for i, item := range items {
		if i > 0 {
			out += sep
		}
		out += item
	}
	return out
}
