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

// countedSpec uploads the counted module (each create appends a line to
// effects and sleeps) with a local state, and returns the effects file.
func countedSpec(t *testing.T, ctx context.Context, c *runner.Client, seconds int) (effects, stateDir string) {
	t.Helper()
	tb := modulesTarball(t, 0)
	effects = filepath.Join(t.TempDir(), "effects")
	stateDir = t.TempDir()
	upload(t, ctx, c, workspaceSpec(t, tb, "counted", map[string]any{"effects": effects, "seconds": seconds}, stateDir), tb)
	return effects, stateDir
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
	id := runner.NewRunID()
	if err := c.StartRun(ctx, runner.RunSpec{ID: id, Action: runner.RunPlan}); err != nil {
		t.Fatal(err)
	}
	res, err := c.WatchRun(ctx, id, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.Plan
}

// A run outlives the connection that watched it: the watcher's connection
// closes mid-apply, a new connection watches again from the first line and
// gets the whole log and the outputs, and the create ran once, however
// often the run was started.
func TestRunOutlivesItsWatch(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := startRunner(t)
	effects, _ := countedSpec(t, ctx, r.client, 3)
	plan := planFor(t, ctx, r.client)

	id := runner.NewRunID()
	spec := runner.RunSpec{ID: id, Action: runner.RunApply, PlanFile: plan.PlanFile, LockFile: plan.LockFile}
	if err := r.client.StartRun(ctx, spec); err != nil {
		t.Fatal(err)
	}
	// Starting it again (a retry after a lost answer) starts nothing.
	if err := r.client.StartRun(ctx, spec); err != nil {
		t.Fatal(err)
	}
	// The first watcher's connection goes away mid-apply, as when the
	// controller restarts.
	watcher, err := runner.Dial(ctx, r.addr, clientTLS(t, testCA))
	if err != nil {
		t.Fatal(err)
	}
	first := newLogs()
	watched := make(chan error, 1)
	go func() {
		_, err := watcher.WatchRun(ctx, id, 0, func(_ int64, line string) { first.add(line) })
		watched <- err
	}()
	first.waitFor(t, "Executing:", time.Minute)
	watcher.Close()
	if err := <-watched; !runner.IsWatchBroken(err) {
		t.Fatalf("a watch whose connection closed should be broken, got %v", err)
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
	if err := other.StartRun(ctx, spec); err != nil {
		t.Fatal(err)
	}
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
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := startRunner(t)
	effects, stateDir := countedSpec(t, ctx, r.client, 20)
	plan := planFor(t, ctx, r.client)

	id := runner.NewRunID()
	started := time.Now()
	if err := r.client.StartRun(ctx, runner.RunSpec{ID: id, Action: runner.RunApply, PlanFile: plan.PlanFile, Deadline: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
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
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := startRunner(t)
	countedSpec(t, ctx, r.client, 20)
	plan := planFor(t, ctx, r.client)

	id := runner.NewRunID()
	if err := r.client.StartRun(ctx, runner.RunSpec{ID: id, Action: runner.RunApply, PlanFile: plan.PlanFile}); err != nil {
		t.Fatal(err)
	}
	l := newLogs()
	done := make(chan error, 1)
	go func() {
		_, err := r.client.WatchRun(ctx, id, 0, func(_ int64, line string) { l.add(line) })
		done <- err
	}()
	l.waitFor(t, "Executing:", time.Minute)

	// A second run is refused while this one goes on.
	err := r.client.StartRun(ctx, runner.RunSpec{ID: runner.NewRunID(), Action: runner.RunPlan})
	wantError(t, err, codes.FailedPrecondition, runner.ReasonRunnerBusy)

	if err := r.client.CancelRun(ctx, id); err != nil {
		t.Fatal(err)
	}
	wantError(t, <-done, codes.Unavailable, runner.ReasonInterrupted)
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
