package statelock

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/landform-dev/landform/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func leases(t *testing.T, ns string) (kubernetes.Interface, string) {
	t.Helper()
	c, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c, ns
}

// Acquire takes a free lock, refuses a held one naming its holder, and
// Release frees only the lock it names.
func TestAcquireAndRelease(t *testing.T) {
	ctx := context.Background()
	c, ns := leases(t, env.Namespace(t))
	l := c.CoordinationV1().Leases(ns)
	h := Holder{Run: "run-1", Pod: &PodHolder{Namespace: ns, Name: "db-runner-abcde", UID: "uid-1"}}

	id, err := Acquire(ctx, l, "lock-tfstate-default-db", h, OperationApply)
	if err != nil {
		t.Fatal(err)
	}
	info, err := Read(ctx, l, "lock-tfstate-default-db")
	if err != nil || info == nil || info.ID != id {
		t.Fatalf("read %v, %v; want lock %s", info, err, id)
	}
	got, ok := ParseHolder(*info)
	if !ok || got.Pod == nil || got.Pod.UID != "uid-1" || got.Run != "run-1" {
		t.Fatalf("holder %+v", got)
	}
	if !strings.Contains(info.Who, "db-runner-abcde") {
		t.Fatalf("Who %q does not name the Pod", info.Who)
	}

	_, err = Acquire(ctx, l, "lock-tfstate-default-db", Holder{Run: "run-2", Pod: h.Pod}, OperationPlan)
	var held *LockedError
	if !errors.As(err, &held) || held.Info.ID != id {
		t.Fatalf("second acquire: %v, want LockedError naming %s", err, id)
	}

	if err := Release(ctx, l, "lock-tfstate-default-db", "some-other-id"); !IsLocked(err) {
		t.Fatalf("releasing another id: %v, want LockedError", err)
	}
	if info, _ := Read(ctx, l, "lock-tfstate-default-db"); info == nil || info.ID != id {
		t.Fatal("releasing another id released the lock")
	}
	if err := Release(ctx, l, "lock-tfstate-default-db", id); err != nil {
		t.Fatal(err)
	}
	if info, _ := Read(ctx, l, "lock-tfstate-default-db"); info != nil {
		t.Fatalf("still locked after release: %+v", info)
	}
	// Releasing a free lock is fine: a retried release.
	if err := Release(ctx, l, "lock-tfstate-default-db", id); err != nil {
		t.Fatalf("releasing again: %v", err)
	}
	// Free again: it can be taken again.
	if _, err := Acquire(ctx, l, "lock-tfstate-default-db", h, OperationApply); err != nil {
		t.Fatal(err)
	}
}

// ReleaseLease frees the lock from the Lease its taking returned, without
// reading it again; a Lease that changed since (force-unlocked and taken
// by someone else) is read and left to its new holder.
func TestReleaseLease(t *testing.T) {
	ctx := context.Background()
	c, ns := leases(t, env.Namespace(t))
	counted := &leaseReadCounter{LeaseInterface: c.CoordinationV1().Leases(ns)}
	h := Holder{Run: "run-1", Pod: &PodHolder{Namespace: ns, Name: "db-runner-abcde", UID: "uid-1"}}

	for _, exists := range []bool{false, true} { // created by the taking, then updated
		id, taken, err := AcquireLease(ctx, counted, "lock-tfstate-default-db", h, OperationApply)
		if err != nil {
			t.Fatal(err)
		}
		reads := counted.reads.Load()
		if err := ReleaseLease(ctx, counted, taken, id); err != nil {
			t.Fatalf("Lease existing before %t: %v", exists, err)
		}
		if n := counted.reads.Load() - reads; n != 0 {
			t.Fatalf("Lease existing before %t: read %d times to release it, want 0", exists, n)
		}
		if info, _ := Read(ctx, counted, "lock-tfstate-default-db"); info != nil {
			t.Fatalf("Lease existing before %t: still locked after release: %+v", exists, info)
		}
	}

	id, taken, err := AcquireLease(ctx, counted, "lock-tfstate-default-db", h, OperationApply)
	if err != nil {
		t.Fatal(err)
	}
	if err := Release(ctx, counted, "lock-tfstate-default-db", id); err != nil { // a force-unlock
		t.Fatal(err)
	}
	other, err := Acquire(ctx, counted, "lock-tfstate-default-db", Holder{Run: "run-2", Pod: h.Pod}, OperationApply)
	if err != nil {
		t.Fatal(err)
	}
	if err := ReleaseLease(ctx, counted, taken, id); !IsLocked(err) {
		t.Fatalf("releasing a lock force-unlocked and taken since: %v, want LockedError", err)
	}
	if info, _ := Read(ctx, counted, "lock-tfstate-default-db"); info == nil || info.ID != other {
		t.Fatalf("lock %+v, want %s's untouched", info, other)
	}
}

// leaseReadCounter counts the Leases read through it.
type leaseReadCounter struct {
	coordinationv1client.LeaseInterface
	reads atomic.Int64
}

func (c *leaseReadCounter) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	c.reads.Add(1)
	return c.LeaseInterface.Get(ctx, name, opts)
}

// The lock is the kubernetes backend's own: real tofu sees a Landform lock
// and waits, naming our holder; and a lock real tofu took is reported held
// and has no Landform identity.
func TestInteropWithTofu(t *testing.T) {
	ctx := context.Background()
	l, run := tofuWorkspace(t, "interop")

	proc, err := CurrentProcess()
	if err != nil {
		t.Fatal(err)
	}
	id, err := Acquire(ctx, l, LeaseName(StateSecretName("", "interop")), Holder{Run: "run-x", Process: proc}, OperationApply, WithLabels(LeaseLabels("", "interop")))
	if err != nil {
		t.Fatal(err)
	}
	out, err := run("plan").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Error acquiring the state lock") || !strings.Contains(string(out), id) || !strings.Contains(string(out), "landform-runner run run-x") {
		t.Fatalf("tofu plan under our lock: %v\n%s", err, out)
	}
	if err := Release(ctx, l, LeaseName("tfstate-default-interop"), id); err != nil {
		t.Fatal(err)
	}

	apply := run("apply", "-auto-approve")
	if err := apply.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-apply.Process.Pid, syscall.SIGKILL); _ = apply.Wait() }()
	var info *LockInfo
	for deadline := time.Now().Add(time.Minute); info == nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("tofu did not take the lock")
		}
		info, _ = Read(ctx, l, LeaseName("tfstate-default-interop"))
	}
	if _, ok := ParseHolder(*info); ok {
		t.Fatalf("tofu's lock parsed as a Landform runner's: %+v", info)
	}
	_, err = Acquire(ctx, l, LeaseName("tfstate-default-interop"), Holder{Run: "run-y", Process: proc}, OperationPlan)
	var held *LockedError
	if !errors.As(err, &held) || held.Info.ID != info.ID {
		t.Fatalf("acquire under tofu's lock: %v", err)
	}
	// Releasing with any other id leaves tofu's lock alone.
	if err := Release(ctx, l, LeaseName("tfstate-default-interop"), id); !IsLocked(err) {
		t.Fatalf("releasing tofu's lock with our old id: %v, want LockedError", err)
	}
	if still, _ := Read(ctx, l, LeaseName("tfstate-default-interop")); still == nil || still.ID != info.ID {
		t.Fatalf("tofu's lock after a release with another id: %+v", still)
	}
}

// A Lease we create carries the labels the backend puts on one it
// creates, so that tofu treats it as its own (workspace delete removes it).
func TestLeaseLabelsMatchTofu(t *testing.T) {
	ctx := context.Background()
	l, run := tofuWorkspace(t, "labels")
	if out, err := run("plan").CombinedOutput(); err != nil {
		t.Fatalf("tofu plan: %v\n%s", err, out)
	}
	theirs, err := l.Get(ctx, LeaseName(StateSecretName("", "labels")), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(ctx, l, LeaseName(StateSecretName("", "ours")), Holder{Run: "run-1"}, OperationPlan, WithLabels(LeaseLabels("", "ours"))); err != nil {
		t.Fatal(err)
	}
	ours, err := l.Get(ctx, LeaseName(StateSecretName("", "ours")), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := theirs.Labels
	want["tfstateSecretSuffix"] = "ours"
	if diff := cmp.Diff(want, ours.Labels); diff != "" {
		t.Fatalf("labels (-tofu's +ours):\n%s", diff)
	}
}

// A process is gone once it exited; this one is not.
func TestProcessGone(t *testing.T) {
	me, err := CurrentProcess()
	if err != nil {
		t.Fatal(err)
	}
	if gone, why := me.Gone(); gone {
		t.Fatalf("this process reported gone: %s", why)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ticks, err := startTicks(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	child := &ProcessHolder{Host: me.Host, BootID: me.BootID, PID: cmd.Process.Pid, StartTicks: ticks}
	if gone, _ := child.Gone(); gone {
		t.Fatal("a running child reported gone")
	}
	reused := *child
	reused.StartTicks++
	if gone, _ := reused.Gone(); !gone {
		t.Fatal("a pid now held by another process (other start time) not reported gone")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if gone, why := child.Gone(); !gone || !strings.Contains(why, "no longer exists") {
		t.Fatalf("a killed child: gone=%v why=%q", gone, why)
	}
	elsewhere := *child
	elsewhere.Host = "another-host"
	if gone, _ := elsewhere.Gone(); gone {
		t.Fatal("a process on another host cannot be proved gone")
	}
	rebooted := *child
	rebooted.BootID = "another-boot"
	if gone, _ := rebooted.Gone(); !gone {
		t.Fatal("a process from before a reboot is gone")
	}
}

// tofuWorkspace is a module whose state is name's in the kubernetes
// backend of a new namespace, initialised; it returns the namespace's
// Leases, and run, which runs tofu in the module.
func tofuWorkspace(t *testing.T, name string) (coordinationv1client.LeaseInterface, func(args ...string) *exec.Cmd) {
	t.Helper()
	tofu, err := testenv.Tool("tofu", "LANDFORM_TOFU")
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	c, _ := leases(t, ns)
	return c.CoordinationV1().Leases(ns), testenv.TofuModule(t, tofu, env.Kubeconfig(t), ns, name, `
resource "terraform_data" "hold" {
  provisioner "local-exec" { command = "sleep 300" }
}
`)
}

// Takers racing for one lock: exactly one wins, whether the Lease is
// missing (create) or free (update); every other taker is told who holds it.
func TestAcquireRace(t *testing.T) {
	ctx := context.Background()
	c, ns := leases(t, env.Namespace(t))
	l := c.CoordinationV1().Leases(ns)
	for _, name := range []string{"lock-tfstate-default-race", "lock-tfstate-default-race"} {
		// The second round finds the Lease the first created, free again.
		const takers = 6
		ids := make(chan string, takers)
		errs := make(chan error, takers)
		for i := range takers {
			go func() {
				id, err := Acquire(ctx, l, name, Holder{Run: fmt.Sprintf("run-%d", i)}, OperationApply)
				ids <- id
				errs <- err
			}()
		}
		var won string
		for range takers {
			id, err := <-ids, <-errs
			switch {
			case err == nil && won != "":
				t.Fatalf("two takers won: %s and %s", won, id)
			case err == nil:
				won = id
			case !IsLocked(err):
				t.Fatalf("a losing taker got %v, want LockedError", err)
			}
		}
		info, err := Read(ctx, l, name)
		if err != nil || info == nil || info.ID != won {
			t.Fatalf("lock %+v (%v), want the winner %s", info, err, won)
		}
		if err := Release(ctx, l, name, won); err != nil {
			t.Fatal(err)
		}
	}
}

func TestParseHolder(t *testing.T) {
	pod := Holder{Run: "run-1", Pod: &PodHolder{Namespace: "ns", Name: "db-runner-x", UID: "uid"}}
	proc := Holder{Run: "run-2", Process: &ProcessHolder{Host: "h", BootID: "b", PID: 7, StartTicks: 9}}
	tests := []struct {
		name string
		info string
		want *Holder
	}{
		{name: "pod", info: EncodeHolder(pod), want: &pod},
		{name: "process", info: EncodeHolder(proc), want: &proc},
		{name: "tofu's own lock", info: ""},
		{name: "other JSON", info: `{"who":"me"}`},
		{name: "not JSON", info: "apply by CI"},
		{name: "pod without uid", info: `{"landform":{"run":"r","pod":{"namespace":"ns","name":"n"}}}`},
		{name: "process without boot id", info: `{"landform":{"run":"r","process":{"host":"h","pid":7}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseHolder(LockInfo{Info: tt.info})
			if ok != (tt.want != nil) {
				t.Fatalf("ok = %v for %q", ok, tt.info)
			}
			if diff := cmp.Diff(tt.want, got); tt.want != nil && diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
	if w := pod.Who(); w != "landform-runner run run-1 (pod ns/db-runner-x)" {
		t.Fatalf("Who %q", w)
	}
	if w := proc.Who(); w != "landform-runner run run-2 (pid 7 on h)" {
		t.Fatalf("Who %q", w)
	}
}
