package testenv

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeController writes a script standing in for landform-controller: it
// prints its arguments and KUBECONFIG, starts a child that outlives it
// unless killed (as a local runner would), prints the child's pid, and
// exits 0 on SIGTERM.
func fakeController(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "landform-controller")
	script := `#!/bin/sh
echo "args: $*"
echo "kubeconfig: $KUBECONFIG"
sleep 300 >/dev/null 2>&1 &
echo "child: $!"
trap 'echo "got SIGTERM"; kill $! 2>/dev/null; exit 0' TERM
while :; do sleep 0.05; done
`
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitFor polls the controller's log until it contains s.
func waitFor(t *testing.T, c *Controller, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(c.Log.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output:\n%s", s, c.Log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// childPID is the pid of the child the fake controller started in its
// life'th life.
func childPID(t *testing.T, c *Controller, life int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(c.Log.String(), "child: ") < life {
		if time.Now().After(deadline) {
			t.Fatalf("no child of life %d in the output:\n%s", life, c.Log)
		}
		time.Sleep(10 * time.Millisecond)
	}
	log := c.Log.String()
	line := log[strings.LastIndex(log, "child: ")+len("child: "):]
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(line, "\n", 2)[0]))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func alive(pid int) bool {
	// A zombie has not been reaped by its (gone) parent yet: it is dead
	// for this purpose. ps prints nothing for a process that is gone.
	out, _ := exec.Command("ps", "-o", "stat=", "-p", strconv.Itoa(pid)).Output()
	stat := strings.TrimSpace(string(out))
	return stat != "" && !strings.HasPrefix(stat, "Z")
}

// awaitDeath fails t with msg unless pid dies within five seconds.
func awaitDeath(t *testing.T, pid int, msg string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: pid %d", msg, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The command line comes from the options, the environment carries the
// kubeconfig, Stop is SIGTERM and a clean exit, Restart starts it again on
// the same options, and Close kills the whole process group.
func TestControllerLifecycle(t *testing.T) {
	c := NewController(ControllerOptions{
		Binary: fakeController(t), Kubeconfig: "/k/config", Runner: "local", RunnerBinary: "/bin/runner",
		Engine: "/bin/tofu", WorkDir: "/work", Args: []string{"--leader-elect"},
	})
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitFor(t, c, "child: ")
	for _, want := range []string{
		"args: --runner=local --runner-binary=/bin/runner --engine=/bin/tofu --work-dir=/work --metrics-addr=0 --health-addr=0 --leader-elect\n",
		"kubeconfig: /k/config\n",
	} {
		if !strings.Contains(c.Log.String(), want) {
			t.Errorf("no %q in the output:\n%s", want, c.Log)
		}
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v\n%s", err, c.Log)
	}
	if !c.Exited() || !strings.Contains(c.Log.String(), "got SIGTERM") {
		t.Fatalf("Stop did not end it with SIGTERM:\n%s", c.Log)
	}

	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	child := childPID(t, c, 2)
	if c.Exited() || !alive(child) {
		t.Fatal("Restart did not start it again")
	}
	c.Close()
	awaitDeath(t, child, "Close left the controller's child running")
}

// Kill reaches the controller alone, as the OOM killer does: what it
// started is left to its own parent-death signal.
func TestControllerKillReachesOnlyTheController(t *testing.T) {
	c := NewController(ControllerOptions{Binary: fakeController(t)})
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	child := childPID(t, c, 1)
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := c.Wait(time.Second); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("want death by SIGKILL, got %v", err)
	}
	if !alive(child) {
		t.Fatal("Kill killed the controller's child too")
	}
	c.Close()
	awaitDeath(t, child, "Close left the child of a killed controller running")
}

// A controller that does not serve metrics within the wait does not
// start: it is killed and the error says why.
func TestControllerStartFailsWhenItExits(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "landform-controller")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho bad flag >&2\nexit 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := NewController(ControllerOptions{Binary: bin, Name: "controller shard1", Metrics: true})
	err := c.Start()
	if err == nil || !strings.Contains(err.Error(), "controller shard1 exited before serving metrics") {
		t.Fatalf("want an exit before metrics, got %v", err)
	}
	if !strings.Contains(c.Log.String(), "bad flag") {
		t.Errorf("the output is not kept: %q", c.Log)
	}
}
