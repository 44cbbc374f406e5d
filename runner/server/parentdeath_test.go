package server

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/landform-dev/landform/internal/mtls"
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
