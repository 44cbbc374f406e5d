// Package server is the executor in the runner process (landform-runner):
// it serves the runner protocol (runner/proto) over mTLS and runs Terraform
// or OpenTofu for one workspace. The controller drives it with the client
// in package runner and never links this package.
//
// One runner serves one workspace, one run at a time. A run runs on the
// runner's own context, not the call's that started it, and keeps its log
// and result until the process exits, for any number of watches (runs.go,
// execute.go, watch.go). Only the run's deadline, CancelRun or Shutdown
// interrupt the engine, gracefully. With the default kubernetes backend the
// runner takes the state lock itself, under its Pod's or its process's
// identity (package statelock), and reaches the state through a loopback
// proxy when the controller hands it a state token (stateaccess.go). An idle
// runner exits on its own (Options.IdleExit, idle.go). Nothing is shared
// between runners, so any number can run at once.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/landform-dev/landform/internal/engines"
	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/runner"
	"github.com/landform-dev/landform/runner/internal/engineproc"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// errShuttingDown is the cancellation cause of operations interrupted by
// Shutdown, to tell them apart from a cancelled or expired call.
var errShuttingDown = errors.New("runner is shutting down")

// Options configure a Server.
type Options struct {
	// Engine is the terraform or tofu binary. Empty: tofu on PATH, else
	// terraform (see DefaultEngine).
	Engine string
	// WorkDir holds the workspace, HOME and the CLI configuration. It is
	// created when missing.
	WorkDir string
	// ProviderMirrors are read-only filesystem mirrors of providers, tried
	// before the registries.
	ProviderMirrors []string
	// InterruptGrace is how long terraform gets to exit after SIGINT before
	// it is killed. Default runner.DefaultInterruptGrace.
	InterruptGrace time.Duration
	// Logger receives lifecycle lines only: never terraform output,
	// variable values or environment. Default slog.Default().
	Logger *slog.Logger
	// Pod identifies the runner Pod the runner runs in; nil for a local
	// runner, which is identified by its process. The runner takes state
	// locks under this identity.
	Pod *statelock.PodHolder
	// IdleExit, when positive, makes Idle report true once the runner has
	// had no call and no run for that long: an orphaned runner Pod ends.
	IdleExit time.Duration
	// EngineDir is the cache of the engine versions runs ask for
	// (RunSpec.engine), installed and verified on demand; the runners of
	// one machine may share it. Empty: <WorkDir>/engines.
	EngineDir string
	// RecycleDirs are emptied, beside WorkDir, when the runner is recycled
	// for another object (Recycle): the Pod's other writable directories.
	RecycleDirs []string
}

// Server implements runnerpb.RunnerServer for one workspace.
type Server struct {
	runnerpb.UnimplementedRunnerServer

	// engine is the runner's own engine (Options.Engine), which runs
	// every run that names none (engineFor).
	engine *engine
	// installer installs the engine versions runs ask for; installed are
	// those handed out already, by binary path (engine_install.go).
	installer   *engines.Installer
	installedMu sync.Mutex
	installed   map[string]*engine
	workDir     string
	homeDir     string
	tmpDir      string
	cliConfig   string
	// enginePath, providerMirrors and engineDir are the options prepare
	// lays the work directory out from, again at each Recycle, which also
	// empties recycleDirs.
	enginePath      string
	providerMirrors []string
	engineDir       string
	recycleDirs     []string
	interruptGrace  time.Duration
	log             *slog.Logger
	health          *health.Server

	// base is cancelled by Shutdown, which interrupts every running
	// terraform command.
	base       context.Context
	cancelBase context.CancelFunc

	// mu guards the shutdown bookkeeping.
	mu       sync.Mutex
	shutting bool
	running  int
	drained  chan struct{} // closed when shutting and nothing runs
	drainOne sync.Once
	exiting  chan struct{} // closed by Exit

	// op serialises operations: terraform commands in one working
	// directory must not overlap. Whoever holds it owns ws.
	op chan struct{}
	ws *workspace

	// holder is who takes state locks: this runner's Pod or process.
	holder statelock.Holder
	// state is the state proxy, started by the first run with a state
	// token; owned by whoever holds op.
	state *stateAccess

	// runsMu guards runs and current: every run this runner accepted, kept
	// with its log and result until the process exits.
	runsMu  sync.Mutex
	runs    map[string]*run
	current *run

	idleExit     atomic.Int64  // nanoseconds; Recycle shortens it
	baseIdleExit time.Duration // Options.IdleExit, again at a run's start
	lastActivity atomic.Int64  // unix nanoseconds
}

// DefaultEngine returns tofu from PATH, else terraform.
func DefaultEngine() (string, error) {
	for _, name := range []string{"tofu", "terraform"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("neither tofu nor terraform found on PATH")
}

// NewServer prepares the work directory and returns a server.
func NewServer(opts Options) (*Server, error) {
	enginePath := opts.Engine
	if enginePath == "" {
		var err error
		if enginePath, err = DefaultEngine(); err != nil {
			return nil, err
		}
	}
	enginePath, err := exec.LookPath(enginePath)
	if err != nil {
		return nil, fmt.Errorf("find engine: %w", err)
	}
	if enginePath, err = filepath.Abs(enginePath); err != nil {
		return nil, fmt.Errorf("find engine: %w", err)
	}
	if opts.WorkDir == "" {
		return nil, errors.New("work dir is required")
	}
	workDir, err := filepath.Abs(opts.WorkDir)
	if err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	s := &Server{
		workDir:        workDir,
		homeDir:        filepath.Join(workDir, "home"),
		tmpDir:         filepath.Join(workDir, "tmp"),
		cliConfig:      filepath.Join(workDir, "cli.tfrc"),
		interruptGrace: opts.InterruptGrace,
		log:            opts.Logger,
		health:         health.NewServer(),
		drained:        make(chan struct{}),
		exiting:        make(chan struct{}),
		op:             make(chan struct{}, 1),
		runs:           map[string]*run{},
	}
	s.touch()
	s.baseIdleExit = opts.IdleExit
	s.idleExit.Store(int64(opts.IdleExit))
	if s.interruptGrace <= 0 {
		s.interruptGrace = runner.DefaultInterruptGrace
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if opts.Pod != nil {
		s.holder.Pod = opts.Pod
	} else if proc, err := statelock.CurrentProcess(); err == nil {
		s.holder.Process = proc
	} else {
		// Without an identity the controller cannot prove this runner
		// gone, and never releases its locks on its own: safe, only
		// less convenient.
		s.log.Info("state locks will carry no process identity", "error", err.Error())
	}
	s.enginePath, s.providerMirrors, s.engineDir = enginePath, opts.ProviderMirrors, opts.EngineDir
	if s.engineDir == "" {
		s.engineDir = filepath.Join(workDir, "engines")
	}
	s.recycleDirs = opts.RecycleDirs
	if err := s.prepare(); err != nil {
		return nil, err
	}
	if dropped := droppedInheritedEnv(); len(dropped) > 0 {
		// Names only: say why a TF_VAR_ from the Pod's env has no effect.
		s.log.Info("not passing inherited environment variables to terraform", "names", dropped)
	}
	s.base, s.cancelBase = context.WithCancel(context.Background())
	return s, nil
}

// prepare lays out the work directory: HOME, the temporary directory, the
// CLI configuration, the engine launcher, and the runner's own engine and
// installer. NewServer calls it, and Recycle again on an emptied directory.
func (s *Server) prepare() error {
	for _, dir := range []string{s.workDir, s.homeDir, s.tmpDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create work dir: %w", err)
		}
	}
	if err := writeCLIConfig(s.cliConfig, s.providerMirrors); err != nil {
		return err
	}
	launcher, err := engineproc.NewLauncher(s.workDir)
	if err != nil {
		return fmt.Errorf("engine launcher: %w", err)
	}
	if s.engine, err = newEngine(s.enginePath, launcher, s.interruptGrace); err != nil {
		return err
	}
	// The runner's own engines (its --engine, and tofu and terraform on
	// PATH) serve a run that asks for their version without a download.
	local := []string{s.enginePath}
	for _, name := range []string{"tofu", "terraform"} {
		if p, err := exec.LookPath(name); err == nil {
			local = append(local, p)
		}
	}
	s.installer = &engines.Installer{Dir: s.engineDir, Local: local}
	s.installedMu.Lock()
	s.installed = map[string]*engine{}
	s.installedMu.Unlock()
	return nil
}

// Register registers the runner and the health service on gs and reports
// SERVING.
func (s *Server) Register(gs *grpc.Server) {
	runnerpb.RegisterRunnerServer(gs, s)
	healthpb.RegisterHealthServer(gs, s.health)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(runnerpb.Runner_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
}

// NewGRPCServer returns a gRPC server with the runner registered, serving
// only over tlsConfig (which should require client certificates).
func (s *Server) NewGRPCServer(tlsConfig *tls.Config) (*grpc.Server, error) {
	if tlsConfig == nil {
		return nil, errors.New("a TLS configuration is required")
	}
	gs := grpc.NewServer(
		grpc.Creds(credentials.NewTLS(tlsConfig)),
		grpc.ChainUnaryInterceptor(s.touchUnary),
		grpc.ChainStreamInterceptor(s.touchStream),
		// Long plans can be silent for minutes; keepalives tell a dead
		// peer from a quiet one.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	)
	s.Register(gs)
	return gs, nil
}

// Shutdown refuses new calls, interrupts running terraform (SIGINT, then a
// kill after the interrupt grace) and waits up to grace for the calls to
// return. A terraform still running when the runner process exits is killed
// by the kernel: terraform-exec gives what it starts a parent-death signal,
// which the engine keeps (package engineproc).
func (s *Server) Shutdown(grace time.Duration) error {
	s.mu.Lock()
	s.shutting = true
	s.maybeDrainedLocked()
	s.mu.Unlock()
	s.health.Shutdown()
	s.cancelBase()
	select {
	case <-s.drained:
		return nil
	case <-time.After(grace):
		return fmt.Errorf("terraform still running %s after the interrupt", grace)
	}
}

func (s *Server) maybeDrainedLocked() {
	if s.shutting && s.running == 0 {
		s.drainOne.Do(func() { close(s.drained) })
	}
}

// begin starts an RPC: it waits for the workspace to be free (honouring
// ctx), and returns a context that is also cancelled by Shutdown, and a
// function that ends the call, translating a cancellation into its status.
func (s *Server) begin(ctx context.Context, rpc string) (context.Context, func(error) error, error) {
	if err := s.enter(); err != nil {
		return nil, nil, err
	}
	leave := s.leave

	opCtx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.base, func() { cancel(errShuttingDown) })
	started := time.Now()
	s.log.Info("rpc started", "rpc", rpc)

	select {
	case s.op <- struct{}{}:
	case <-opCtx.Done():
		err := contextStatus(opCtx)
		stop()
		cancel(nil)
		leave()
		s.log.Info("rpc finished", "rpc", rpc, "code", status.Code(err).String(), "duration", time.Since(started).Round(time.Millisecond).String())
		return nil, nil, err
	}

	end := func(err error) error {
		if err != nil && opCtx.Err() != nil {
			err = contextStatus(opCtx)
		}
		<-s.op
		stop()
		cancel(nil)
		leave()
		s.log.Info("rpc finished", "rpc", rpc, "code", status.Code(err).String(), "duration", time.Since(started).Round(time.Millisecond).String())
		return err
	}
	return opCtx, end, nil
}

// contextStatus is the status of a call whose context ended.
func contextStatus(ctx context.Context) error {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errShuttingDown):
		return newError(codes.Unavailable, runner.ReasonInterrupted, "terraform was interrupted: the runner is shutting down", nil)
	case errors.Is(cause, errRunDeadline):
		// terraform got SIGINT and the interrupt grace: it normally saves
		// its state, but may have been killed at the end of the grace.
		return newError(codes.DeadlineExceeded, runner.ReasonDeadlineExceeded, cause.Error()+": terraform was interrupted", nil)
	case errors.Is(cause, errRunCancelled):
		return newError(codes.Unavailable, runner.ReasonInterrupted, "the run was cancelled: terraform was interrupted", nil)
	case errors.Is(cause, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "deadline exceeded: terraform was interrupted")
	default:
		return status.Error(codes.Canceled, "call cancelled: terraform was interrupted")
	}
}

// initialisedWorkspace is the uploaded workspace, initialised (init output
// goes to logf): what every terraform call needs first. The caller holds
// op.
func (s *Server) initialisedWorkspace(ctx context.Context, logf func(string)) (*workspace, error) {
	ws, err := s.requireWorkspace()
	if err != nil {
		return nil, err
	}
	if ws.engine == nil {
		// No run yet: the runner's own engine.
		if err := ws.useEngine(s.engine); err != nil {
			return nil, err
		}
	}
	if err := s.ensureInit(ctx, ws, logf); err != nil {
		return nil, err
	}
	return ws, nil
}

// requireWorkspace returns the uploaded workspace. The caller holds op.
func (s *Server) requireWorkspace() (*workspace, error) {
	if s.ws == nil {
		return nil, newError(codes.FailedPrecondition, runner.ReasonNoWorkspace, "no workspace: call UploadWorkspace first", nil)
	}
	return s.ws, nil
}
