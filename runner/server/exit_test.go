package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/landform-dev/landform/runner"
)

// TestExit: a runner asked to exit while an apply runs refuses and goes
// on; once nothing runs it answers, refuses every call after it, and
// tells its process to exit.
func TestExit(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	r := startRunner(t)
	tb := modulesTarball(t, 0)
	upload(t, ctx, r.client, workspaceSpec(t, tb, "slow", nil, t.TempDir()), tb)
	plan, err := r.client.Plan(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	applyCtx, cancelApply := context.WithCancel(ctx)
	defer cancelApply()
	_, applied := applyExecuting(t, applyCtx, r.client, plan.PlanFile)

	wantError(t, r.client.Exit(ctx), codes.FailedPrecondition, runner.ReasonRunnerBusy)
	select {
	case <-r.server.Exiting():
		t.Fatal("the runner is exiting with an apply in progress")
	default:
	}

	cancelApply()
	<-applied
	// terraform stops within its interrupt grace; until then the runner
	// stays busy.
	deadline := time.Now().Add(30 * time.Second)
	for err = r.client.Exit(ctx); runner.IsReason(err, runner.ReasonRunnerBusy) && time.Now().Before(deadline); err = r.client.Exit(ctx) {
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("exit once idle: %v", err)
	}
	select {
	case <-r.server.Exiting():
	case <-time.After(time.Second):
		t.Fatal("Exit answered OK but Exiting is not closed")
	}
	_, err = r.client.Outputs(ctx)
	wantError(t, err, codes.Unavailable, runner.ReasonInterrupted)
	if err := r.client.Exit(ctx); err != nil {
		t.Fatalf("asked again: %v", err)
	}
}

// TestExitEndsTheProcess: the runner binary, asked to exit, exits by
// itself.
func TestExitEndsTheProcess(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, time.Minute)
	lr := startLocalRunner(t, ctx, runner.LocalOptions{})
	if err := lr.Client.Exit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lr.Exited():
	case <-time.After(15 * time.Second):
		t.Fatal("the runner process still runs 15s after it was asked to exit")
	}
}

// TestExitAsARunEnds: the controller asks right after collecting a run,
// which can be before the run's goroutine has left (its watches have the
// result first). The runner agrees, and its shutdown waits for that
// goroutine.
func TestExitAsARunEnds(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	r := startRunner(t)
	tb := modulesTarball(t, 0)
	upload(t, ctx, r.client, workspaceSpec(t, tb, "slow", nil, t.TempDir()), tb)
	if _, err := r.client.Plan(ctx, false, nil); err != nil {
		t.Fatal(err)
	}
	// What the run's goroutine holds until it leaves.
	if err := r.server.enter(); err != nil {
		t.Fatal(err)
	}
	if err := r.client.Exit(ctx); err != nil {
		t.Fatalf("exit right after a run ended: %v", err)
	}
	shut := make(chan error, 1)
	go func() { shut <- r.server.Shutdown(10 * time.Second) }()
	select {
	case err := <-shut:
		t.Fatalf("shut down (%v) before the ended run's goroutine left", err)
	case <-time.After(200 * time.Millisecond):
	}
	r.server.leave()
	select {
	case err := <-shut:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no shutdown 5s after the run's goroutine left")
	}
}
