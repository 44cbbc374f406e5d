// Package sharding proves Flux-style sharding: several real
// landform-controller processes, each started with its own
// --watch-label-selector and --leader-elect against one real API server
// (envtest), split the Terraform objects between them. Every object is
// reconciled, by exactly one controller, and a dependsOn across shards
// still works.
//
// The binaries are LANDFORM_CONTROLLER_BIN, LANDFORM_RUNNER_BIN and
// LANDFORM_TOFU, else bin/landform-controller, bin/landform-runner and
// bin/tofu (`make tools build`); the API server is KUBEBUILDER_ASSETS or
// bin/. Without them the tests skip, saying what is missing.
// LANDFORM_TEST_LOGS=1 streams the controllers' output; otherwise a failed
// test prints it.
package sharding

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/testenv"
)

var (
	env        *testenv.Env
	kubeconfig string // reaches env, for the controller processes
	bins       struct{ controller, runner, tofu string }
	artifacts  *testenv.Artifacts
	// skipReason is why the suite cannot run here; empty when it can.
	skipReason string
	verbose    = os.Getenv("LANDFORM_TEST_LOGS") != ""
)

func TestMain(m *testing.M) { os.Exit(runSuite(m)) }

func runSuite(m *testing.M) int {
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	for _, b := range []struct {
		path      *string
		env, file string
	}{
		{&bins.controller, "LANDFORM_CONTROLLER_BIN", "landform-controller"},
		{&bins.runner, "LANDFORM_RUNNER_BIN", "landform-runner"},
		{&bins.tofu, "LANDFORM_TOFU", "tofu"},
	} {
		*b.path = testenv.EnvOr(b.env, filepath.Join(root, "bin", b.file))
		if _, err := os.Stat(*b.path); err != nil {
			skipReason = fmt.Sprintf("the sharding test needs %s at %s: run `make tools build` or set %s (%v)", b.file, *b.path, b.env, err)
			return m.Run()
		}
	}
	tmp, err := os.MkdirTemp("", "landform-sharding-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(tmp)
	if env, err = testenv.Start(); err != nil {
		skipReason = fmt.Sprintf("the sharding test needs the envtest binaries: %v", err)
		return m.Run()
	}
	defer func() { _ = env.Stop() }()
	kubeconfig = filepath.Join(tmp, "kubeconfig")
	if err := placement.WriteKubeconfig(env.Config, kubeconfig); err != nil {
		panic(err)
	}
	if artifacts, err = testenv.StartArtifacts(filepath.Join(tmp, "artifacts")); err != nil {
		panic(err)
	}
	defer artifacts.Close()
	return m.Run()
}
