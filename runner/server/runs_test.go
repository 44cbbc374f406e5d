package server

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/landform-dev/landform/runner"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// countedPlan uploads the counted module (each create appends a line to
// effects and sleeps seconds) with a local state, and plans it.
func countedPlan(t *testing.T, ctx context.Context, c *runner.Client, seconds int) (plan *runner.PlanOutput, effects, stateDir string) {
	t.Helper()
	tb := modulesTarball(t, 0)
	effects = filepath.Join(t.TempDir(), "effects")
	stateDir = t.TempDir()
	upload(t, ctx, c, workspaceSpec(t, tb, "counted", map[string]any{"effects": effects, "seconds": seconds}, stateDir), tb)
	return planFor(t, ctx, c), effects, stateDir
}

func countCreates(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "created")
}

func planFor(t *testing.T, ctx context.Context, c *runner.Client) *runner.PlanOutput {
	t.Helper()
	id := startRun(t, ctx, c, runner.RunSpec{Action: runner.Plan})
	res, err := c.WatchRun(ctx, id, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.Plan
}

// startRun starts spec's run, under a new id unless spec names one, and
// returns its id.
func startRun(t *testing.T, ctx context.Context, c *runner.Client, spec runner.RunSpec) string {
	t.Helper()
	if spec.ID == "" {
		spec.ID = runner.NewRunID()
	}
	if err := c.StartRun(ctx, spec); err != nil {
		t.Fatal(err)
	}
	return spec.ID
}

// runResult is how a watched run ended.
type runResult struct {
	res *runner.RunResult
	err error
}

// watchExecuting watches run id in the background and returns once
// terraform executes: the run's log, still growing, and how it ends.
func watchExecuting(t *testing.T, ctx context.Context, c *runner.Client, id string, opts ...runner.WatchOption) (*logs, <-chan runResult) {
	t.Helper()
	l := newLogs()
	watched := make(chan runResult, 1)
	go func() {
		res, err := c.WatchRun(ctx, id, 0, func(_ int64, line string) { l.add(line) }, opts...)
		watched <- runResult{res, err}
	}()
	l.waitFor(t, "Executing:", time.Minute)
	return l, watched
}

// applyExecuting applies planFile in the background and returns once
// terraform executes it: the apply's log, still growing, and its error.
func applyExecuting(t *testing.T, ctx context.Context, c *runner.Client, planFile []byte) (*logs, <-chan error) {
	t.Helper()
	l := newLogs()
	applied := make(chan error, 1)
	go func() {
		_, err := c.Apply(ctx, planFile, l.add)
		applied <- err
	}()
	l.waitFor(t, "Executing:", time.Minute)
	return l, applied
}

// A run outlives the connection that watched it: the watcher's connection
// closes mid-apply, a new connection watches again from the first line and
// gets the whole log and the outputs, and the create ran once, however
// often the run was started.
func TestRunOutlivesItsWatch(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	r := startRunner(t)
	plan, effects, _ := countedPlan(t, ctx, r.client, 3)

	spec := runner.RunSpec{ID: runner.NewRunID(), Action: runner.Apply, PlanFile: plan.PlanFile, LockFile: plan.LockFile}
	id := startRun(t, ctx, r.client, spec)
	// Starting it again (a retry after a lost answer) starts nothing.
	startRun(t, ctx, r.client, spec)
	// The first watcher's connection goes away mid-apply, as when the
	// controller restarts.
	watcher, err := runner.Dial(ctx, r.addr, clientTLS(t, testCA))
	if err != nil {
		t.Fatal(err)
	}
	_, watched := watchExecuting(t, ctx, watcher, id)
	watcher.Close()
	if got := <-watched; !runner.IsWatchBroken(got.err) {
		t.Fatalf("a watch whose connection closed should be broken, got %v", got.err)
	}

	// Another connection, from the first line.
	other, err := runner.Dial(ctx, r.addr, clientTLS(t, testCA))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var lines []string
	var indexes []int64
	res, err := other.WatchRun(ctx, id, 0, func(i int64, line string) {
		indexes = append(indexes, i)
		lines = append(lines, line)
	})
	if err != nil {
		t.Fatal(err)
	}
	log := strings.Join(lines, "\n")
	for _, want := range []string{"Executing:", "Apply complete!"} {
		if !strings.Contains(log, want) {
			t.Errorf("replayed log lacks %q:\n%s", want, log)
		}
	}
	for i, idx := range indexes {
		if idx != int64(i) {
			t.Fatalf("line %d has index %d", i, idx)
		}
	}
	outs := outputsByName(res.Outputs)
	if o := outs["effects"]; o == nil || string(o.ValueJson) != mustJSON(t, effects) {
		t.Fatalf("outputs %v", res.Outputs)
	}
	if n := countCreates(t, effects); n != 1 {
		t.Fatalf("the create ran %d times, want once", n)
	}
	// Starting it again once it ended still starts nothing.
	startRun(t, ctx, other, spec)
	if _, err := other.WatchRun(ctx, id, 0, nil); err != nil {
		t.Fatal(err)
	}
	if n := countCreates(t, effects); n != 1 {
		t.Fatalf("the create ran %d times after a late retry, want once", n)
	}

	// A watch from a later line gets only the rest, and the result again.
	var tail []string
	if _, err := other.WatchRun(ctx, id, int64(len(lines)-1), func(_ int64, line string) { tail = append(tail, line) }); err != nil {
		t.Fatal(err)
	}
	if len(tail) != 1 || tail[0] != lines[len(lines)-1] {
		t.Fatalf("watch from the last line got %q", tail)
	}
}

// The runner enforces a run's deadline itself: terraform is interrupted,
// saves its state, and the run ends DEADLINE_EXCEEDED.
func TestRunDeadlineInterruptsGracefully(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	r := startRunner(t)
	plan, effects, stateDir := countedPlan(t, ctx, r.client, 20)

	started := time.Now()
	id := startRun(t, ctx, r.client, runner.RunSpec{Action: runner.Apply, PlanFile: plan.PlanFile, Deadline: 3 * time.Second})
	_, err := r.client.WatchRun(ctx, id, 0, nil)
	e := wantError(t, err, codes.DeadlineExceeded, runner.ReasonDeadlineExceeded)
	if !strings.Contains(e.Message, "ran out of") || !strings.Contains(e.Message, "interrupted") {
		t.Fatalf("message: %s", e.Message)
	}
	if d := time.Since(started); d > 40*time.Second {
		t.Fatalf("the run ended %s after a 3s deadline", d)
	}
	if n := countCreates(t, effects); n != 1 {
		t.Fatalf("creates %d, want 1", n)
	}
	// terraform saved its state before exiting: a state file exists and
	// its lock is gone (a new plan runs).
	if state := readFile(t, filepath.Join(stateDir, "terraform.tfstate")); !strings.Contains(state, `"terraform_data"`) {
		t.Fatalf("the interrupted create is not in the state:\n%s", state)
	}
	planFor(t, ctx, r.client)
}

// CancelRun interrupts a run; the run reports it, and the runner takes new
// runs at once.
func TestCancelRun(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	r := startRunner(t)
	plan, _, _ := countedPlan(t, ctx, r.client, 20)

	id := startRun(t, ctx, r.client, runner.RunSpec{Action: runner.Apply, PlanFile: plan.PlanFile})
	_, done := watchExecuting(t, ctx, r.client, id)

	// A second run is refused while this one goes on.
	err := r.client.StartRun(ctx, runner.RunSpec{ID: runner.NewRunID(), Action: runner.Plan})
	wantError(t, err, codes.FailedPrecondition, runner.ReasonRunnerBusy)

	if err := r.client.CancelRun(ctx, id); err != nil {
		t.Fatal(err)
	}
	wantError(t, (<-done).err, codes.Unavailable, runner.ReasonInterrupted)
	if err := r.client.CancelRun(ctx, id); err != nil {
		t.Fatalf("cancelling a finished run: %v", err)
	}
	_, err = r.client.WatchRun(ctx, "run-unknown", 0, nil)
	wantError(t, err, codes.NotFound, runner.ReasonUnknownRun)
	planFor(t, ctx, r.client)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A run keeps a bounded log: the overflow becomes one marker line, which
// says how much was dropped once the run ended; indexes stay stable.
func TestRunLogIsBounded(t *testing.T) {
	r := newRun(&runnerpb.RunSpec{RunId: "run-1"})
	for i := range maxRunLines + 5 {
		r.log(fmt.Sprintf("line %d", i))
	}
	lines, _, done, _ := r.snapshot(0)
	if done || len(lines) != maxRunLines || lines[maxRunLines-2] != fmt.Sprintf("line %d", maxRunLines-2) || !strings.Contains(lines[maxRunLines-1], "not kept") {
		t.Fatalf("%d lines, last %q", len(lines), lines[len(lines)-1])
	}
	r.finish(nil, nil, nil)
	lines, _, done, _ = r.snapshot(maxRunLines - 1)
	if !done || len(lines) != 1 || !strings.HasPrefix(lines[0], "(6 more lines") {
		t.Fatalf("after the end: %q", lines)
	}

	big := newRun(&runnerpb.RunSpec{RunId: "run-2"})
	line := strings.Repeat("x", 64<<10)
	for range 200 {
		big.log(line)
	}
	lines, _, _, _ = big.snapshot(0)
	kept := 0
	for _, l := range lines {
		kept += len(l)
	}
	if kept > maxRunBytes+1024 || len(lines) >= 200 {
		t.Fatalf("kept %d bytes in %d lines", kept, len(lines))
	}
}
