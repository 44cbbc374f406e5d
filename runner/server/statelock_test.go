package server

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/runner"
)

// countedOnKube uploads the counted module with its state in k.
func countedOnKube(t *testing.T, ctx context.Context, c *runner.Client, k *kubeState, seconds int) (effects string) {
	t.Helper()
	tb := modulesTarball(t, 0)
	effects = filepath.Join(t.TempDir(), "effects")
	upload(t, ctx, c, k.useBackend(workspaceSpec(t, tb, "counted", map[string]any{"effects": effects, "seconds": seconds}, "")), tb)
	return effects
}

// runnerOnKube starts a runner with the counted module uploaded (each
// create taking seconds) and its state in a kubernetes backend of its own,
// named name.
func runnerOnKube(t *testing.T, ctx context.Context, name string, seconds int) (r *testRunner, k *kubeState, effects string) {
	t.Helper()
	k = newKubeState(t, name)
	r = startRunner(t)
	return r, k, countedOnKube(t, ctx, r.client, k, seconds)
}

// With the kubernetes backend the runner takes the state lock itself: the
// Lease names the run and the runner process while terraform runs (and
// real tofu is refused, naming it), and is free once the run ended.
func TestRunTakesTheStateLock(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	r, k, effects := runnerOnKube(t, ctx, "held", 5)
	plan := planFor(t, ctx, r.client)
	if info := k.lock(t); info != nil {
		t.Fatalf("locked after the plan: %+v", info)
	}

	id := startRun(t, ctx, r.client, runner.RunSpec{Action: runner.Apply, PlanFile: plan.PlanFile, LockFile: plan.LockFile})
	l, watched := watchExecuting(t, ctx, r.client, id)
	info := k.lock(t)
	if info == nil {
		t.Fatal("no state lock while terraform applies")
	}
	me, err := statelock.CurrentProcess()
	if err != nil {
		t.Fatal(err)
	}
	h, ok := statelock.ParseHolder(*info)
	if !ok || h.Run != id || h.Process == nil || *h.Process != *me || h.Pod != nil {
		t.Fatalf("lock holder %+v (%s), want run %s in process %+v", h, info.Info, id, me)
	}
	if info.Operation != statelock.OperationApply || !strings.Contains(info.Who, id) {
		t.Fatalf("lock info %+v", info)
	}
	// It is the backend's own lock: real tofu is refused and names us.
	tofu := k.tofuModule(t, `resource "terraform_data" "other" {}`)
	out, err := tofu("plan").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Error acquiring the state lock") || !strings.Contains(string(out), info.Who) {
		t.Fatalf("tofu plan while the runner applies: %v\n%s", err, out)
	}

	got := <-watched
	if got.err != nil {
		t.Fatal(got.err)
	}
	if info := k.lock(t); info != nil {
		t.Fatalf("the lock outlived the run: %+v", info)
	}
	if n := countCreates(t, effects); n != 1 {
		t.Fatalf("creates %d, want 1", n)
	}
	if o := outputsByName(got.res.Outputs)["effects"]; o == nil {
		t.Fatalf("outputs %v", got.res.Outputs)
	}
	// terraform wrote the state without the lock (-lock=false).
	if len(k.state(t, ctx)) == 0 {
		t.Fatal("the state Secret is empty")
	}
	for _, want := range []string{"Landform took the state lock " + info.ID, "Landform released the state lock " + info.ID} {
		if !strings.Contains(l.text(), want) {
			t.Fatalf("run log lacks %q:\n%s", want, l.text())
		}
	}
}

// A lock someone else holds fails the run with STATE_LOCKED and the
// holder's lock info; a Landform runner's lock also carries its identity.
func TestRunFindsTheStateLocked(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	r, k, _ := runnerOnKube(t, ctx, "taken", 1)

	// Real tofu, in the middle of an apply, holds it.
	tofu := k.tofuModule(t, `resource "terraform_data" "hold" {
  provisioner "local-exec" { command = "sleep 300" }
}`)
	apply := tofu("apply", "-auto-approve")
	if err := apply.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	kill := func() {
		if !killed {
			killed = true
			_ = syscall.Kill(-apply.Process.Pid, syscall.SIGKILL)
			_ = apply.Wait()
		}
	}
	defer kill()
	theirs := k.waitLocked(t, time.Minute)

	_, err := r.client.Plan(ctx, false, nil)
	e := wantError(t, err, codes.Aborted, runner.ReasonStateLocked)
	if e.Metadata["id"] != theirs.ID || e.Metadata["who"] != theirs.Who || e.Metadata["operation"] != "OperationTypeApply" || e.Metadata["created"] == "" {
		t.Fatalf("lock metadata %v, want tofu's lock %+v", e.Metadata, theirs)
	}
	if _, ok := e.Metadata["holder"]; ok {
		t.Fatalf("tofu's lock reported with a Landform holder: %v", e.Metadata)
	}
	// Killed, tofu leaves its lock; the runner did not touch it.
	kill()
	if still := k.lock(t); still == nil || still.ID != theirs.ID {
		t.Fatalf("tofu's lock after the refused run: %+v", still)
	}
	if err := statelock.Release(ctx, k.leases, k.leaseName(), theirs.ID); err != nil {
		t.Fatal(err)
	}

	// Another Landform runner's lock.
	other := statelock.Holder{Run: "run-other", Pod: &statelock.PodHolder{Namespace: k.namespace, Name: "taken-runner-abcde", UID: "uid-1"}}
	lockID, err := statelock.Acquire(ctx, k.leases, k.leaseName(), other, statelock.OperationApply)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.client.Plan(ctx, false, nil)
	e = wantError(t, err, codes.Aborted, runner.ReasonStateLocked)
	h, ok := statelock.ParseHolder(statelock.LockInfo{Info: e.Metadata["holder"]})
	if e.Metadata["id"] != lockID || !ok || h.Pod == nil || *h.Pod != *other.Pod || h.Run != "run-other" {
		t.Fatalf("lock metadata %v", e.Metadata)
	}
	if err := statelock.Release(ctx, k.leases, k.leaseName(), lockID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.Plan(ctx, false, nil); err != nil {
		t.Fatalf("plan once the state is free: %v", err)
	}
}

// A runner that is killed (not stopped) leaves its lock behind, held under
// an identity that is then provably gone: what the controller checks
// before it releases that lock, by its id.
func TestKilledRunnerLeavesAProvablyGoneLock(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	k := newKubeState(t, "killed")
	lr := startLocalRunner(t, ctx, runner.LocalOptions{})
	countedOnKube(t, ctx, lr.Client, k, 20)
	plan := planFor(t, ctx, lr.Client)

	id := startRun(t, ctx, lr.Client, runner.RunSpec{Action: runner.Apply, PlanFile: plan.PlanFile})
	info := k.waitLocked(t, time.Minute)
	h, ok := statelock.ParseHolder(*info)
	if !ok || h.Run != id || h.Process == nil || h.Process.PID != lr.PID {
		t.Fatalf("lock holder %+v, want run %s in runner process %d", h, id, lr.PID)
	}
	if gone, why := h.Process.Gone(); gone {
		t.Fatalf("a running runner reported gone: %s", why)
	}

	if err := syscall.Kill(lr.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lr.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("the runner survived SIGKILL")
	}
	if after := k.lock(t); after == nil || after.ID != info.ID {
		t.Fatalf("lock after the runner was killed: %+v, want %s", after, info.ID)
	}
	gone, why := h.Process.Gone()
	if !gone || !strings.Contains(why, "no longer exists") {
		t.Fatalf("killed runner: gone=%v (%s)", gone, why)
	}
	if err := statelock.Release(ctx, k.leases, k.leaseName(), info.ID); err != nil {
		t.Fatal(err)
	}
	if after := k.lock(t); after != nil {
		t.Fatalf("still locked: %+v", after)
	}
}

// Shutdown interrupts terraform and releases the runner's lock: the run
// ends INTERRUPTED and terraform saved what it did.
func TestShutdownReleasesTheStateLock(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	r, k, _ := runnerOnKube(t, ctx, "shutdown", 20)
	plan := planFor(t, ctx, r.client)
	id := startRun(t, ctx, r.client, runner.RunSpec{Action: runner.Apply, PlanFile: plan.PlanFile})
	_, watched := watchExecuting(t, ctx, r.client, id)
	if k.lock(t) == nil {
		t.Fatal("no lock while terraform applies")
	}
	if err := r.server.Shutdown(time.Minute); err != nil {
		t.Fatal(err)
	}
	wantError(t, (<-watched).err, codes.Unavailable, runner.ReasonInterrupted)
	if info := k.lock(t); info != nil {
		t.Fatalf("lock left after the shutdown: %+v", info)
	}
	if len(k.state(t, ctx)) == 0 {
		t.Fatal("no state saved on the interrupt")
	}
}

// A lock this runner's own finished run left behind (its release failed)
// is released by the next run; a lock naming a run this runner does not
// know is not.
func TestRunnerReleasesItsOwnLeftoverLock(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	r, k, _ := runnerOnKube(t, ctx, "leftover", 1)
	earlier := startRun(t, ctx, r.client, runner.RunSpec{Action: runner.Plan})
	if _, err := r.client.WatchRun(ctx, earlier, 0, nil); err != nil {
		t.Fatal(err)
	}
	me, err := statelock.CurrentProcess()
	if err != nil {
		t.Fatal(err)
	}

	stranger, err := statelock.Acquire(ctx, k.leases, k.leaseName(), statelock.Holder{Run: "run-not-here", Process: me}, statelock.OperationPlan)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.client.Plan(ctx, false, nil)
	wantError(t, err, codes.Aborted, runner.ReasonStateLocked)
	if info := k.lock(t); info == nil || info.ID != stranger {
		t.Fatalf("the lock of a run this runner does not know was touched: %+v", info)
	}
	if err := statelock.Release(ctx, k.leases, k.leaseName(), stranger); err != nil {
		t.Fatal(err)
	}

	leftover, err := statelock.Acquire(ctx, k.leases, k.leaseName(), statelock.Holder{Run: earlier, Process: me}, statelock.OperationPlan)
	if err != nil {
		t.Fatal(err)
	}
	l := newLogs()
	if _, err := r.client.Plan(ctx, false, l.add); err != nil {
		t.Fatalf("plan over this runner's own leftover lock: %v", err)
	}
	if !strings.Contains(l.text(), "released the state lock "+leftover+" left by its earlier run") {
		t.Fatalf("plan log:\n%s", l.text())
	}
	if info := k.lock(t); info != nil {
		t.Fatalf("locked after the plan: %+v", info)
	}
}
