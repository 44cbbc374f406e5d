package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/landform-dev/landform/internal/mtls"
	"github.com/landform-dev/landform/internal/testenv"
	"github.com/landform-dev/landform/runner"
)

const fakeControllerEnv = "LANDFORM_TEST_FAKE_CONTROLLER"

// fakeController is the test binary re-executed as a controller that
// starts a local runner, says so, and waits to be killed.
func fakeController() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ca, err := mtls.NewCA("fake-controller", time.Hour)
	var lr *runner.LocalRunner
	if err == nil {
		lr, err = runner.StartLocalRunner(ctx, ca, runner.LocalOptions{
			Binary:  os.Getenv("LANDFORM_RUNNER_BIN"),
			Engine:  os.Getenv("LANDFORM_TOFU"),
			WorkDir: os.Getenv(fakeControllerEnv),
		})
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println("ready", lr.Address)
	select {}
}

// TestLocalRunnerDiesWithController kills a controller with SIGKILL and
// expects its local runner to stop too.
func TestLocalRunnerDiesWithController(t *testing.T) {
	t.Parallel()
	bin := runnerBinary(t)
	workDir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fakeControllerEnv+"="+workDir, "LANDFORM_RUNNER_BIN="+bin, "LANDFORM_TOFU="+enginePath)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
	if err != nil || !ok {
		t.Fatalf("fake controller: %q, %v", line, err)
	}
	if conn, err := net.Dial("tcp", addr); err != nil {
		t.Fatalf("runner not listening: %v", err)
	} else {
		conn.Close()
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	deadline := time.Now().Add(15 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return // the runner is gone
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("runner still listening 15s after its controller died")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestEngineDiesWithRunner kills a runner with SIGKILL in the middle of an
// apply and expects the kernel to end the engine too: the launcher
// terraform-exec started with a parent-death signal became the engine.
func TestEngineDiesWithRunner(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	lr := startLocalRunner(t, ctx, runner.LocalOptions{})
	tb := modulesTarball(t, 0)
	upload(t, ctx, lr.Client, workspaceSpec(t, tb, "slow", map[string]any{"seconds": 60}, t.TempDir()), tb)
	plan, err := lr.Client.Plan(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	applyExecuting(t, ctx, lr.Client, plan.PlanFile)

	// runner → the engine → the provisioner's sleep.
	engines := children(lr.PID)
	if len(engines) != 1 {
		t.Fatalf("the runner has children %v, want the engine alone", engines)
	}
	// The sleep outlives the engine, as it always did: end it. It may
	// start a moment after the engine logged it.
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if sleeps := children(engines[0]); len(sleeps) > 0 || time.Since(start) > 5*time.Second {
			for _, pid := range sleeps {
				defer syscall.Kill(pid, syscall.SIGKILL)
			}
			break
		}
	}

	if err := syscall.Kill(lr.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// At once: left alone, the engine would die only at its next progress
	// line (every 10s), of the broken pipe.
	deadline := time.Now().Add(5 * time.Second)
	for alive(engines[0]) {
		if time.Now().After(deadline) {
			t.Fatalf("engine %d still running 5s after its runner was killed", engines[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	var out []int
	for child, stat := range testenv.ProcFiles("stat") {
		// pid (comm) state ppid ...
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}
