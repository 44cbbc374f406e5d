package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/landform-dev/landform/runner"
)

// TestInterruptReleasesLock runs a long apply on one runner, checks that a
// second runner on the same state is refused with the lock holder, then
// cancels the apply and checks that terraform stopped cleanly: the call
// returns at once, the first runner is free again soon after, and the lock
// is gone.
func TestInterruptReleasesLock(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	a, b := startRunner(t), startRunner(t)
	tb := modulesTarball(t, 0)
	stateDir := t.TempDir()
	spec := workspaceSpec(t, tb, "slow", nil, stateDir)
	upload(t, ctx, a.client, spec, tb)
	upload(t, ctx, b.client, spec, tb)

	plan, err := a.client.Plan(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	applyCtx, cancelApply := context.WithCancel(ctx)
	defer cancelApply()
	// Streamed while terraform runs: the sleep has started.
	_, applied := applyExecuting(t, applyCtx, a.client, plan.PlanFile)

	_, err = b.client.Plan(ctx, false, nil)
	e := wantError(t, err, codes.Aborted, runner.ReasonStateLocked)
	if e.Metadata["id"] == "" || e.Metadata["who"] == "" || e.Metadata["created"] == "" || e.Metadata["operation"] != "OperationTypeApply" {
		t.Fatalf("lock metadata %v", e.Metadata)
	}

	cancelled := time.Now()
	cancelApply()
	select {
	case err := <-applied:
		wantError(t, err, codes.Canceled, "")
	case <-time.After(5 * time.Second):
		t.Fatal("apply did not return within 5s of its cancellation")
	}

	// The runner takes new work only once terraform has exited.
	if _, err := a.client.Outputs(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(cancelled); d > 20*time.Second {
		t.Fatalf("terraform took %s to stop after the interrupt", d)
	}
	if _, err := b.client.Plan(ctx, false, nil); err != nil {
		t.Fatalf("state still locked after the interrupt: %v", err)
	}
}
