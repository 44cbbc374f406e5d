package testenv

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// StreamLogs is LANDFORM_TEST_LOGS=1: the suites stream the output of the
// processes they start (controllers, runners) instead of printing it when
// a test fails.
var StreamLogs = os.Getenv("LANDFORM_TEST_LOGS") != ""

// ControllerOptions are how a Controller runs landform-controller.
type ControllerOptions struct {
	// Name says which controller in messages; "controller" when empty.
	Name string
	// Binary is landform-controller: Tool("landform-controller",
	// "LANDFORM_CONTROLLER_BIN").
	Binary string
	// Kubeconfig reaches the API server. It is the controller's KUBECONFIG,
	// so that nothing it starts reaches the machine's own cluster either;
	// CHECKPOINT_DISABLE=1 keeps its engines from calling home.
	Kubeconfig string
	// Runner places the runners: "local" (child processes of the
	// controller, RunnerBinary) or "pod".
	Runner       string
	RunnerBinary string
	// Engine is the tofu or terraform the runners run.
	Engine string
	// WorkDir is its work directory; keep it across restarts, as a
	// Deployment keeps its volume.
	WorkDir string
	// Metrics serves /metrics on a free local port (MetricsURL), and Start
	// waits until it does: the manager has started. Without it the
	// controller serves no metrics.
	Metrics bool
	// Args are more flags, after the ones above.
	Args []string
	// Environ is the environment it starts from; nil is this process's.
	Environ []string
	// Env is added to Environ.
	Env []string
	// Output receives its output as Log does: a file to keep it,
	// os.Stderr to stream it.
	Output io.Writer
	// StopTimeout bounds Stop's wait after SIGTERM; one minute when zero.
	StopTimeout time.Duration
}

// Controller is the real landform-controller binary as a child process of
// a test or of the bench. It dies with the process that started it
// (DieWithParent) and leads its own process group, so that Close ends its
// local runners with it; Signal and Kill reach the controller alone, as a
// kubelet or the OOM killer would, and leave its runners to their own
// parent-death signal.
type Controller struct {
	// Log is everything it wrote, across restarts.
	Log *SyncBuffer
	// MetricsURL is its /metrics, with ControllerOptions.Metrics.
	MetricsURL string

	opts        ControllerOptions
	metricsAddr string
	cmd         *exec.Cmd
	done        chan struct{}
	err         error
}

// NewController prepares a controller; Start starts it.
func NewController(o ControllerOptions) *Controller {
	if o.Name == "" {
		o.Name = "controller"
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = time.Minute
	}
	return &Controller{Log: &SyncBuffer{}, opts: o}
}

// StartController starts a controller for one test: it fails t when the
// controller cannot start, and when t ends it closes the controller and,
// if t failed, prints its output (unless it was streamed).
func StartController(t testing.TB, o ControllerOptions) *Controller {
	t.Helper()
	c := NewController(o)
	streamed := c.opts.Output != nil || StreamLogs
	if StreamLogs && c.opts.Output == nil {
		c.opts.Output = Prefixed(os.Stderr, c.opts.Name+": ")
	}
	t.Cleanup(func() {
		c.Close()
		if t.Failed() && !streamed {
			t.Logf("%s (%s) output:\n%s", c.opts.Name, strings.Join(c.args(), " "), c.Log.String())
		}
	})
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// args is its command line after the binary.
func (c *Controller) args() []string {
	o := c.opts
	var args []string
	for _, f := range []struct{ flag, value string }{
		{"runner", o.Runner}, {"runner-binary", o.RunnerBinary}, {"engine", o.Engine}, {"work-dir", o.WorkDir},
	} {
		if f.value != "" {
			args = append(args, "--"+f.flag+"="+f.value)
		}
	}
	metrics := "0"
	if c.metricsAddr != "" {
		metrics = c.metricsAddr
	}
	args = append(args, "--metrics-addr="+metrics, "--health-addr=0")
	return append(args, o.Args...)
}

// Start starts the controller, and with Metrics waits until it serves them.
func (c *Controller) Start() error {
	o := c.opts
	c.metricsAddr, c.MetricsURL = "", ""
	if o.Metrics {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		c.metricsAddr, c.MetricsURL = addr, "http://"+addr+"/metrics"
	}
	cmd := exec.Command(o.Binary, c.args()...)
	env := o.Environ
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(append(env[:len(env):len(env)], "KUBECONFIG="+o.Kubeconfig, "CHECKPOINT_DISABLE=1"), o.Env...)
	var out io.Writer = c.Log
	if o.Output != nil {
		out = io.MultiWriter(c.Log, o.Output)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = DieWithParent()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", o.Name, err)
	}
	done := make(chan struct{})
	c.cmd, c.done, c.err = cmd, done, nil
	go func() { c.err = cmd.Wait(); close(done) }()
	if o.Metrics {
		if err := c.awaitMetrics(time.Minute); err != nil {
			c.Close()
			return err
		}
	}
	return nil
}

// awaitMetrics waits until the controller serves its metrics.
func (c *Controller) awaitMetrics(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(c.MetricsURL)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if c.Exited() {
			return fmt.Errorf("%s exited before serving metrics: %v", c.opts.Name, c.err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not serve metrics within %s: %w", c.opts.Name, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// PID is its process id.
func (c *Controller) PID() int { return c.cmd.Process.Pid }

// Exited says whether it has exited, and the local runners it started
// have closed its output, which they share.
func (c *Controller) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the controller alone.
func (c *Controller) Signal(sig os.Signal) error { return c.cmd.Process.Signal(sig) }

// Wait waits up to timeout for it to exit and returns how it ended: nil
// for a clean exit.
func (c *Controller) Wait(timeout time.Duration) error {
	select {
	case <-c.done:
		return c.err
	case <-time.After(timeout):
		return fmt.Errorf("%s did not exit within %s", c.opts.Name, timeout)
	}
}

// Stop ends it as a Deployment's rollout does: SIGTERM, then a wait of
// StopTimeout for it to drain; after that its whole process group is
// killed and Stop says it did not exit in time. Nil: it exited cleanly
// (or had already exited).
func (c *Controller) Stop() error {
	if c.Exited() {
		return nil
	}
	_ = c.Signal(syscall.SIGTERM)
	if err := c.Wait(c.opts.StopTimeout); err != nil {
		if !c.Exited() {
			c.Close()
		}
		return fmt.Errorf("after SIGTERM: %w", err)
	}
	return nil
}

// Kill SIGKILLs the controller alone, as the OOM killer does: its local
// runners get their parent-death signal. It waits up to StopTimeout for
// it, and for the runners that share its output to end.
func (c *Controller) Kill() error {
	_ = c.Signal(syscall.SIGKILL)
	if err := c.Wait(c.opts.StopTimeout); !c.Exited() {
		return fmt.Errorf("after SIGKILL: %w", err)
	}
	return nil
}

// Restart stops it (Stop) if it runs, and starts it again with the same
// options: the same work directory, a new metrics port.
func (c *Controller) Restart() error {
	stopErr := c.Stop()
	fmt.Fprintf(c.Log, "--- %s restarted ---\n", c.opts.Name)
	if err := c.Start(); err != nil {
		return errors.Join(stopErr, err)
	}
	return stopErr
}

// Close kills its whole process group (it and the local runners it
// started, even after it exited itself) and waits for it, leaving nothing
// behind. Closing a controller never started does nothing.
func (c *Controller) Close() {
	if c.cmd == nil {
		return
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	<-c.done
	if c.opts.WorkDir != "" {
		// Detached local runners outlive the controller on purpose; the
		// test is done with them too.
		KillLocalRunners(c.opts.WorkDir)
	}
}

// KillLocalRunners kills (SIGKILL) the local runners a controller with
// work directory workDir started, which run in sessions of their own: the
// processes whose command line names one of their run directories
// (<workDir>/runners/landform-runner-*), and nothing else. Linux only (it
// reads /proc); elsewhere it does nothing.
func KillLocalRunners(workDir string) {
	runDirs := filepath.Join(workDir, "runners", "landform-runner-")
	for pid, cmdline := range ProcFiles("cmdline") {
		if pid != os.Getpid() && strings.Contains(string(cmdline), runDirs) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// freeAddr is a local address nothing listens on now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Prefixed writes to w what it is given, each line after prefix (the
// controllers and runners write whole lines).
func Prefixed(w io.Writer, prefix string) io.Writer { return &prefixWriter{w: w, prefix: prefix} }

type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	var out strings.Builder
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if l != "" {
			out.WriteString(p.prefix + l)
		}
	}
	_, err := io.WriteString(p.w, out.String())
	return len(b), err
}
