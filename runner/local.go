package runner

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/landform-dev/landform/internal/mtls"
)

// localCertValidity covers the longest run a local runner serves; gRPC may
// reconnect during a run, and the certificates must still be valid then.
const localCertValidity = 7 * 24 * time.Hour

// LocalOptions configure a runner started as a child process.
type LocalOptions struct {
	// Binary is the landform-runner executable. Empty: landform-runner on
	// PATH.
	Binary string
	// Engine is passed as --engine; empty lets the runner choose.
	Engine string
	// WorkDir is where the runner's private directory is created. Empty:
	// the system temp dir.
	WorkDir string
	// ProviderMirrors are passed as --provider-mirror.
	ProviderMirrors []string
	// EngineDir is passed as --engine-dir: the engine versions runs ask
	// for, shared by the local runners. Empty: each runner's own.
	EngineDir string
	// Env is added to the controller's environment for the runner.
	Env []string
	// IdleExit is passed as --idle-exit when positive: the runner exits
	// that long after its last run and call.
	IdleExit time.Duration
	// Stdout and Stderr receive the runner's own output (lifecycle lines
	// only). Nil discards it. A detached runner writes it to runner.log
	// in its directory instead.
	Stdout, Stderr io.Writer
	// Detach makes the runner outlive the controller, as a runner Pod
	// does: it runs in a session of its own, without a parent-death
	// signal, its output in its own directory, so that a controller
	// killed mid-apply (SIGKILL, OOM) leaves terraform running and its
	// successor attaches to the run. Without it the runner gets SIGTERM
	// when the controller dies (Linux), which suits processes that own
	// the whole environment (`landform dev`, tests).
	Detach bool
}

// RunnerLogFile is where a detached runner writes its own output, in its
// directory.
const RunnerLogFile = "runner.log"

// StartLocal starts a runner as a child process listening on loopback, the
// way `--runner=local` runs it, and returns a connected client and a stop
// function. stop closes the client, sends SIGTERM (the runner interrupts
// terraform, which releases its lock), kills the runner if it is still
// running after grace, and removes its directory.
func StartLocal(ctx context.Context, ca *mtls.CA, opts LocalOptions) (*Client, func(grace time.Duration) error, error) {
	lr, err := StartLocalRunner(ctx, ca, opts)
	if err != nil {
		return nil, nil, err
	}
	return lr.Client, lr.Stop, nil
}

// LocalRunner is a runner started as a child process.
type LocalRunner struct {
	// Client is connected to the runner.
	Client *Client
	// PID is the runner process's id.
	PID int
	// Address is where the runner listens.
	Address string
	// Dir is the runner's private directory (certificates, work dir).
	Dir string
	// Stop closes the client, sends SIGTERM, kills after grace and
	// removes the runner's directory (RemoveRunnerDir: a state the runner
	// kept unsaved stays, unless ForgetKeptState was called).
	Stop   func(grace time.Duration) error
	exited chan struct{}
	// keptElsewhere is set once the controller holds its own copy of a
	// state the runner kept unsaved.
	keptElsewhere *atomic.Bool
}

// ForgetKeptState lets Stop remove a state the runner kept unsaved with
// the rest of its directory: the controller keeps a copy of its own, or
// the state is written.
func (l *LocalRunner) ForgetKeptState() { l.keptElsewhere.Store(true) }

// Exited is closed when the runner process has exited.
func (l *LocalRunner) Exited() <-chan struct{} { return l.exited }

// StartLocalRunner is StartLocal, with the process's liveness at hand.
func StartLocalRunner(ctx context.Context, ca *mtls.CA, opts LocalOptions) (*LocalRunner, error) {
	binary := opts.Binary
	if binary == "" {
		binary = "landform-runner"
	}
	binary, err := exec.LookPath(binary)
	if err != nil {
		return nil, fmt.Errorf("find runner binary: %w", err)
	}
	if opts.WorkDir != "" {
		if err := os.MkdirAll(opts.WorkDir, 0o700); err != nil {
			return nil, fmt.Errorf("create work dir: %w", err)
		}
	}
	dir, err := os.MkdirTemp(opts.WorkDir, "landform-runner-")
	if err != nil {
		return nil, fmt.Errorf("create runner dir: %w", err)
	}
	cleanupDir := true
	defer func() {
		if cleanupDir {
			os.RemoveAll(dir)
		}
	}()

	files, tlsConfig, err := writeLocalCerts(ca, dir)
	if err != nil {
		return nil, err
	}
	// The runner writes its address to a pipe (its fd 3) and closes it:
	// the controller reads it the moment it is there, without polling.
	addrR, addrW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("runner address pipe: %w", err)
	}
	defer addrR.Close()
	args := []string{
		"--listen", "127.0.0.1:0",
		"--address-fd", "3",
		"--tls-cert", files.cert,
		"--tls-key", files.key,
		"--tls-client-ca", files.ca,
		"--work-dir", filepath.Join(dir, "work"),
		// A child process takes state locks as a process, even when the
		// controller's environment names the controller's Pod.
		"--pod-name=",
	}
	if opts.IdleExit > 0 {
		args = append(args, "--idle-exit", opts.IdleExit.String())
	}
	if opts.Engine != "" {
		args = append(args, "--engine", opts.Engine)
	}
	for _, m := range opts.ProviderMirrors {
		args = append(args, "--provider-mirror", m)
	}
	if opts.EngineDir != "" {
		args = append(args, "--engine-dir", opts.EngineDir)
	}
	// Not CommandContext: ctx bounds the start, not the runner's life.
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), opts.Env...)
	cmd.Stdout, cmd.Stderr = opts.Stdout, opts.Stderr
	cmd.ExtraFiles = []*os.File{addrW}
	if opts.Detach {
		// Not the controller's output: a pipe the controller's parent
		// reads would outlive it only as long as that reader does.
		logFile, err := os.OpenFile(filepath.Join(dir, RunnerLogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			addrW.Close()
			return nil, fmt.Errorf("runner log: %w", err)
		}
		defer logFile.Close()
		cmd.Stdout, cmd.Stderr = logFile, logFile
		detach(cmd)
	} else {
		setParentDeathSignal(cmd)
	}
	err = cmd.Start()
	addrW.Close()
	if err != nil {
		return nil, fmt.Errorf("start runner: %w", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	kill := func() {
		_ = cmd.Process.Kill()
		<-exited
	}

	addr, err := readAddress(ctx, addrR)
	if err != nil {
		kill()
		if waitErr != nil {
			err = fmt.Errorf("%w (runner: %v)", err, waitErr)
		}
		return nil, err
	}
	client, err := Dial(ctx, addr, tlsConfig)
	if err != nil {
		kill()
		return nil, err
	}

	cleanupDir = false
	keptElsewhere := &atomic.Bool{}
	var once sync.Once
	var stopErr error
	stop := func(grace time.Duration) error {
		once.Do(func() {
			client.Close()
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
				stopErr = fmt.Errorf("stop runner: %w", err)
			}
			select {
			case <-exited:
			case <-time.After(grace):
				kill()
				stopErr = errors.Join(stopErr, fmt.Errorf("runner still running %s after SIGTERM: killed", grace))
			}
			remove := RemoveRunnerDir
			if keptElsewhere.Load() {
				remove = func(dir string) (string, error) { return "", os.RemoveAll(dir) }
			}
			if _, err := remove(dir); err != nil {
				stopErr = errors.Join(stopErr, fmt.Errorf("remove runner dir: %w", err))
			}
		})
		return stopErr
	}
	return &LocalRunner{Client: client, PID: cmd.Process.Pid, Address: addr, Dir: dir, Stop: stop, exited: exited, keptElsewhere: keptElsewhere}, nil
}

// KeptStateFile is where a runner keeps, in its work directory, a state
// the engine could not write to the backend, until it is written.
const KeptStateFile = "unsaved.tfstate"

// RemoveRunnerDir removes a local runner's directory, but for a state the
// runner kept unsaved (work/KeptStateFile), which stays where it was: the
// copy of last resort, should the controller never have been able to keep
// its own in the object's namespace. It returns that file's path, if any.
func RemoveRunnerDir(dir string) (kept string, err error) {
	kept = filepath.Join(dir, "work", KeptStateFile)
	if _, err := os.Stat(kept); err != nil {
		return "", os.RemoveAll(dir)
	}
	var errs []error
	for _, d := range []string{dir, filepath.Dir(kept)} {
		entries, err := os.ReadDir(d)
		if err != nil {
			return kept, err
		}
		for _, e := range entries {
			if p := filepath.Join(d, e.Name()); p != kept && p != filepath.Dir(kept) {
				errs = append(errs, os.RemoveAll(p))
			}
		}
	}
	return kept, errors.Join(errs...)
}

type certFiles struct{ cert, key, ca string }

// DialLocal connects to a local runner an earlier controller process
// started, at addr, with a client certificate of ca, which must be the CA
// that runner trusts (its directory's tls/ca.crt).
func DialLocal(ctx context.Context, ca *mtls.CA, addr string) (*Client, error) {
	clientCert, clientKey, err := ca.IssueClient("landform-controller", localCertValidity)
	if err != nil {
		return nil, fmt.Errorf("issue client certificate: %w", err)
	}
	tlsConfig, err := mtls.ClientTLSConfig(clientCert, clientKey, ca.CertPEM(), "127.0.0.1")
	if err != nil {
		return nil, err
	}
	return Dial(ctx, addr, tlsConfig)
}

// writeLocalCerts issues the runner's server certificate and the
// controller's client certificate. Only the runner's files are written, in
// a private directory; the client's stay in memory.
func writeLocalCerts(ca *mtls.CA, dir string) (certFiles, *tls.Config, error) {
	serverCert, serverKey, err := ca.IssueServer([]string{"127.0.0.1", "::1", "localhost"}, localCertValidity)
	if err != nil {
		return certFiles{}, nil, fmt.Errorf("issue runner certificate: %w", err)
	}
	clientCert, clientKey, err := ca.IssueClient("landform-controller", localCertValidity)
	if err != nil {
		return certFiles{}, nil, fmt.Errorf("issue client certificate: %w", err)
	}
	tlsDir := filepath.Join(dir, "tls")
	if err := os.Mkdir(tlsDir, 0o700); err != nil {
		return certFiles{}, nil, fmt.Errorf("create tls dir: %w", err)
	}
	files := certFiles{
		cert: filepath.Join(tlsDir, "tls.crt"),
		key:  filepath.Join(tlsDir, "tls.key"),
		ca:   filepath.Join(tlsDir, "ca.crt"),
	}
	for path, data := range map[string][]byte{files.cert: serverCert, files.key: serverKey, files.ca: ca.CertPEM()} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return certFiles{}, nil, fmt.Errorf("write %s: %w", filepath.Base(path), err)
		}
	}
	tlsConfig, err := mtls.ClientTLSConfig(clientCert, clientKey, ca.CertPEM(), "127.0.0.1")
	if err != nil {
		return certFiles{}, nil, err
	}
	return files, tlsConfig, nil
}

// readAddress reads the address the runner writes to its end of the pipe.
// End of file without an address means the runner exited (or closed the
// pipe) before listening.
func readAddress(ctx context.Context, r *os.File) (string, error) {
	type result struct {
		addr string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		data, err := io.ReadAll(io.LimitReader(r, 256))
		got <- result{strings.TrimSpace(string(data)), err}
	}()
	select {
	case <-ctx.Done():
		// Unblocks the reader.
		r.Close()
		return "", fmt.Errorf("wait for runner address: %w", ctx.Err())
	case res := <-got:
		switch {
		case res.err != nil:
			return "", fmt.Errorf("read runner address: %w", res.err)
		case res.addr == "":
			return "", errors.New("runner exited before listening")
		}
		return res.addr, nil
	}
}
