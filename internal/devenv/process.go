package devenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// process is a child process with its output in a log file.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	log     *os.File
	exited  chan struct{}
	err     error
}

// startProcess starts binary with its output in logPath. The child gets its
// own process group, so that a Ctrl-C in the terminal reaches only
// `landform dev`, which stops the children in order; on Linux the kernel
// stops it if `landform dev` dies without doing so.
func (e *Env) startProcess(name, logPath, binary string, args, env []string) (*process, error) {
	log, err := openLog(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, log: log, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.exited)
		e.fail(fmt.Errorf("%s exited: %v%s", name, p.err, p.lastLogLine()))
	}()
	return p, nil
}

// stop sends SIGTERM and waits up to grace before killing the process.
func (p *process) stop(grace time.Duration) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s still running %s after SIGTERM: killed", p.name, grace)
	}
}

// waitReady polls url until it answers 200, the process exits or timeout
// passes.
func (p *process) waitReady(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	hc := &http.Client{Timeout: time.Second}
	for {
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited while starting: %v%s", p.name, p.err, p.lastLogLine())
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s after %s (see %s)", p.name, url, timeout, p.logPath)
		case <-tick.C:
		}
	}
}

// lastLogLine quotes the last line of the process's log, where a process
// that fails to start says why.
func (p *process) lastLogLine() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	last := strings.TrimSpace(string(lines[len(lines)-1]))
	if last == "" {
		return fmt.Sprintf(" (see %s)", p.logPath)
	}
	if len(last) > 300 {
		last = last[:300] + "…"
	}
	return fmt.Sprintf(" (last log line: %s; see %s)", last, p.logPath)
}

// openLog opens a fresh log file, keeping the previous run's as .1.
func openLog(path string) (*os.File, error) {
	if _, err := os.Stat(path); err == nil {
		_ = os.Rename(path, path+".1")
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
}
