package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// toolsTarget is what puts every tool a suite runs into the repository's
// bin/: the tools (OpenTofu, kube-apiserver, Flux's controllers) and
// Landform's own binaries.
const toolsTarget = "make tools build"

// MissingToolError is the error of Tool and ToolDir: a program a suite
// runs is not where it was looked for.
type MissingToolError struct {
	// Names are the missing programs.
	Names []string
	// Where they were looked for: a file for Tool, a directory for ToolDir.
	Where string
	// EnvVar names them (or their directory); empty when only bin/ does.
	EnvVar string
	// Skip says that a test may skip for it: neither EnvVar nor make asked
	// for the program, so this is someone's `go test` on a checkout
	// without `make tools build`, not a misconfigured `make test`.
	Skip bool
	Err  error
	// dir says that Where is a directory of tools (ToolDir).
	dir bool
}

func (e *MissingToolError) Error() string {
	how := "run `" + toolsTarget + "`"
	switch {
	case e.EnvVar != "" && e.dir:
		how += " or point " + e.EnvVar + " at a directory holding them"
	case e.EnvVar != "":
		how += " or point " + e.EnvVar + " at it"
	}
	msg := fmt.Sprintf("%s missing at %s: %s", strings.Join(e.Names, ", "), e.Where, how)
	if e.Err != nil {
		msg += " (" + e.Err.Error() + ")"
	}
	return msg
}

func (e *MissingToolError) Unwrap() error { return e.Err }

// Skippable reports whether err is a missing tool that a test may skip
// for (MissingToolError.Skip); any other error fails the test.
func Skippable(err error) bool {
	var missing *MissingToolError
	return errors.As(err, &missing) && missing.Skip
}

// Tool finds the program name that a suite runs: the file $envVar names
// when it is set, else name in the repository's bin/, where `make tools
// build` puts it. The rule for a missing program is the same in every
// suite: under make (`make test` sets the variables; any recipe has
// MAKELEVEL) it fails the suite, so that CI cannot pass by testing
// nothing; a plain `go test` without the variable skips, saying which make
// target provides it (Skippable). envVar may be empty: then only bin/.
func Tool(name, envVar string) (string, error) {
	path := filepath.Join(repoRoot(), "bin", name)
	if envVar != "" && os.Getenv(envVar) != "" {
		path = os.Getenv(envVar)
	}
	if _, err := os.Stat(path); err != nil {
		return "", missing([]string{name}, path, envVar, err)
	}
	return path, nil
}

// ToolDir finds a directory holding the programs names: the one $envVar
// names when it is set, else the repository's bin/. A missing program is
// an error as Tool's.
func ToolDir(envVar string, names ...string) (string, error) {
	dir := filepath.Join(repoRoot(), "bin")
	if os.Getenv(envVar) != "" {
		dir = os.Getenv(envVar)
	}
	var absent []string
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			absent = append(absent, n)
		}
	}
	if len(absent) > 0 {
		err := missing(absent, dir, envVar, nil)
		err.dir = true
		return "", err
	}
	return dir, nil
}

func missing(names []string, where, envVar string, err error) *MissingToolError {
	asked := os.Getenv("MAKELEVEL") != "" || (envVar != "" && os.Getenv(envVar) != "")
	return &MissingToolError{Names: names, Where: where, EnvVar: envVar, Skip: !asked, Err: err}
}

// SkipOrFail ends t when err is not nil: a skip when Skippable, else a
// failure. Suites whose TestMain finds the tools keep its error and call
// this first in every test.
func SkipOrFail(t testing.TB, err error) {
	t.Helper()
	switch {
	case err == nil:
	case Skippable(err):
		t.Skip(err)
	default:
		t.Fatal(err)
	}
}

// Programs are Landform's own binaries and the engine, which the suites
// that run Landform as processes and the bench start.
type Programs struct {
	// Controller is landform-controller: LANDFORM_CONTROLLER_BIN, else
	// bin/landform-controller.
	Controller string
	// Runner is landform-runner: LANDFORM_RUNNER_BIN, else
	// bin/landform-runner.
	Runner string
	// Tofu is OpenTofu: LANDFORM_TOFU, else bin/tofu.
	Tofu string
}

// Find finds each program p leaves empty with Tool, checks that the ones
// it names exist (a missing one is never Skippable: someone asked for it),
// and makes every path absolute.
func (p *Programs) Find() error {
	for _, t := range []struct {
		path      *string
		name, env string
	}{
		{&p.Controller, "landform-controller", "LANDFORM_CONTROLLER_BIN"},
		{&p.Runner, "landform-runner", "LANDFORM_RUNNER_BIN"},
		{&p.Tofu, "tofu", "LANDFORM_TOFU"},
	} {
		var err error
		if *t.path == "" {
			if *t.path, err = Tool(t.name, t.env); err != nil {
				return err
			}
		} else if _, err := os.Stat(*t.path); err != nil {
			return &MissingToolError{Names: []string{t.name}, Where: *t.path, Err: err}
		}
		if *t.path, err = filepath.Abs(*t.path); err != nil {
			return err
		}
	}
	return nil
}
