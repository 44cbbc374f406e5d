package server

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/landform-dev/landform/runner"
)

// TestRecycleRefusedOutsideItsOwnPIDNamespace: a runner that is not
// process 1 of its PID namespace (a local runner, this test's) refuses to
// be recycled, since kill(-1) would reach processes that are not its
// Pod's, and is left as it was: its workspace and runs are still there.
// The recycling itself is tested in runner Pods (controllers,
// TestRunnerPodReusedForTheNextObject).
func TestRecycleRefusedOutsideItsOwnPIDNamespace(t *testing.T) {
	t.Parallel()
	if os.Getpid() == 1 {
		t.Skip("the test runs as process 1")
	}
	ctx := testContext(t, time.Minute)
	r := startRunner(t)
	tb := modulesTarball(t, 0)
	upload(t, ctx, r.client, workspaceSpec(t, tb, "basic", map[string]any{"name": "w", "dir": t.TempDir()}, t.TempDir()), tb)
	if _, err := r.client.Plan(ctx, false, nil); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadDir(r.server.workDir)
	if err != nil {
		t.Fatal(err)
	}

	wantError(t, r.client.Recycle(ctx, time.Minute), codes.FailedPrecondition, runner.ReasonNotRecyclable)

	after, err := os.ReadDir(r.server.workDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) || len(after) == 0 {
		t.Fatalf("the work directory changed: %d entries before, %d after", len(before), len(after))
	}
	if _, err := os.Stat(filepath.Join(r.server.workDir, filepath.Base(r.server.cliConfig))); err != nil {
		t.Fatalf("the CLI configuration is gone: %v", err)
	}
	if got := r.server.IdleExit(); got == time.Minute {
		t.Fatalf("the idle exit was changed to %s", got)
	}
	if _, err := r.client.Plan(ctx, false, nil); err != nil {
		t.Fatalf("planning again in the same workspace: %v", err)
	}
}
