package server

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/landform-dev/landform/internal/testenv"
	"github.com/landform-dev/landform/runner"
)

// providerRunner is a runner on engine with the test provider, from the
// offline provider mirror `make tools` fills.
func providerRunner(t *testing.T, engine string) *testRunner {
	t.Helper()
	return startRunnerOpts(t, Options{Engine: engine, ProviderMirrors: []string{tool(t, "providers", "")}})
}

// A plan returns the dependency lock file it was made with, and an apply
// on another runner uses exactly that file: a lock file that differs from
// the plan's makes the plan unusable (plan again), not a generic failure;
// the plan's own lock file applies.
func TestApplyUsesThePlansLockFile(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	planner := providerRunner(t, enginePath)
	tb := modulesTarball(t, 0)
	spec := workspaceSpec(t, tb, "provider", nil, t.TempDir())
	upload(t, ctx, planner.client, spec, tb)
	plan := planFor(t, ctx, planner.client)
	if !strings.Contains(string(plan.LockFile), `provider "registry.opentofu.org/landform-dev/landform"`) {
		t.Fatalf("the plan's lock file:\n%s", plan.LockFile)
	}

	// Another runner, as after a restart: its module has no lock file.
	applier := providerRunner(t, enginePath)
	upload(t, ctx, applier.client, spec, tb)
	// Valid, and the installed provider matches it, but it is not the
	// plan's: one more hash.
	modified := bytes.Replace(plan.LockFile, []byte("hashes = ["), []byte("hashes = [\n    \"h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\","), 1)
	if bytes.Equal(modified, plan.LockFile) {
		t.Fatalf("no hashes in the lock file:\n%s", plan.LockFile)
	}
	_, err := applier.client.ApplyWithLockFile(ctx, plan.PlanFile, modified, nil)
	e := wantError(t, err, codes.FailedPrecondition, runner.ReasonPlanUnusable)
	if !strings.Contains(e.Message, "Inconsistent dependency lock file") {
		t.Fatalf("message: %s", e.Message)
	}

	outs, err := applier.client.ApplyWithLockFile(ctx, plan.PlanFile, plan.LockFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o := outputsByName(outs)["input"]; o == nil || string(o.ValueJson) != `"provider"` {
		t.Fatalf("outputs %v", outs)
	}
	if got := readFile(t, filepath.Join(applier.server.currentRoot(), "provider", lockFileName)); got != string(plan.LockFile) {
		t.Fatalf("the apply's lock file:\n%s\nwant the plan's:\n%s", got, plan.LockFile)
	}
}

// TestDefaultBackend checks the kubernetes backend override and that
// backend_config reaches init: pointed at an API server that is not there,
// init fails trying to reach it, and that is a retryable failure, not a
// configuration error. (The kubernetes backend against a real API server is
// covered by the controller's envtest suites.)
func TestDefaultBackend(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 2*time.Minute)
	r := startRunner(t)
	tb := modulesTarball(t, 0)

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	testenv.UnreachableKubeconfig(t, kubeconfig)
	spec := workspaceSpec(t, tb, "basic", map[string]any{"name": "k", "dir": t.TempDir()}, "")
	spec.CustomBackend = ""
	spec.BackendConfig = map[string]string{
		"secret_suffix": "basic",
		"namespace":     "default",
		"config_path":   kubeconfig,
	}
	upload(t, ctx, r.client, spec, tb)
	override := readFile(t, filepath.Join(r.server.currentRoot(), "basic", BackendOverrideFile))
	if override != defaultBackend {
		t.Fatalf("backend override:\n%s", override)
	}

	_, err := r.client.Plan(ctx, false, nil)
	e := wantError(t, err, codes.Unknown, runner.ReasonTerraformFailed)
	if !strings.Contains(e.Message, "127.0.0.1:1") {
		t.Fatalf("init did not use the backend config: %s", e.Message)
	}
}
