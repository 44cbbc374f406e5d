package server

import (
	"testing"
	"time"

	"github.com/landform-dev/landform/runner"
)

// A runner exits on its own once it has had no run and no call for its
// idle-exit time, and not while a run goes on: an orphaned runner Pod does
// not live forever, and a long run is never cut short by it.
func TestRunnerExitsWhenIdle(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	const idle = 2 * time.Second
	lr := startLocalRunner(t, ctx, runner.LocalOptions{IdleExit: idle})
	plan, effects, _ := countedPlan(t, ctx, lr.Client, 8)

	// The apply runs four times the idle time, watched by nobody.
	id := startRun(t, ctx, lr.Client, runner.RunSpec{Action: runner.Apply, PlanFile: plan.PlanFile})
	for countCreates(t, effects) == 0 {
		select {
		case <-lr.Exited():
			t.Fatal("the runner exited before the apply started")
		case <-ctx.Done():
			t.Fatal("the apply did not start")
		case <-time.After(100 * time.Millisecond):
		}
	}
	select {
	case <-lr.Exited():
		t.Fatal("the runner exited while a run was in progress")
	case <-time.After(3 * idle):
	}
	res, err := lr.Client.WatchRun(ctx, id, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	ended := time.Now()
	if len(res.Outputs) == 0 {
		t.Fatal("no outputs")
	}
	select {
	case <-lr.Exited():
		if d := time.Since(ended); d < idle/2 {
			t.Fatalf("the runner exited %s after the last call, before its idle time %s", d, idle)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the runner still runs a minute after its last call (idle exit %s)", idle)
	}
}
