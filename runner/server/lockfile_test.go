package server

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/landform-dev/landform/runner"
)

// providerMirror is the offline provider mirror make tools fills.
func providerMirror(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "bin", "providers"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("needs the test provider in %s (make tools): %v", dir, err)
	}
	return dir
}

// A plan returns the dependency lock file it was made with, and an apply
// on another runner uses exactly that file: a lock file that differs from
// the plan's makes the plan unusable (plan again), not a generic failure;
// the plan's own lock file applies.
func TestApplyUsesThePlansLockFile(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	mirror := providerMirror(t)
	planner := startRunnerOpts(t, Options{Engine: enginePath, ProviderMirrors: []string{mirror}})
	tb := modulesTarball(t, 0)
	spec := workspaceSpec(t, tb, "provider", nil, t.TempDir())
	upload(t, ctx, planner.client, spec, tb)
	plan := planFor(t, ctx, planner.client)
	if !strings.Contains(string(plan.LockFile), `provider "registry.opentofu.org/landform-dev/landform"`) {
		t.Fatalf("the plan's lock file:\n%s", plan.LockFile)
	}

	// Another runner, as after a restart: its module has no lock file.
	applier := startRunnerOpts(t, Options{Engine: enginePath, ProviderMirrors: []string{mirror}})
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
