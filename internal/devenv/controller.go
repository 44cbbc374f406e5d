package devenv

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/landform-dev/landform/controllers"
	"github.com/landform-dev/landform/internal/app"
	"github.com/landform-dev/landform/runner"
)

// ControllerOptions configure the Landform controller with local runners,
// as cmd/controller builds it with --runner=local.
type ControllerOptions struct {
	// WorkDir holds the artifact cache, the runners' kubeconfig and their
	// directories.
	WorkDir string
	// RunnerBinary and Engine are the local runners' binary and engine.
	RunnerBinary, Engine string
	// ProviderMirrors are passed to the runners as --provider-mirror.
	ProviderMirrors []string
	// RunnerEnv is added to the runners' environment.
	RunnerEnv []string
	// RunnerOutput receives the runners' own output (lifecycle lines).
	RunnerOutput io.Writer
	// Concurrent is the number of objects reconciled in parallel; 4 when 0.
	Concurrent int
	// EventsAddr is notification-controller's event endpoint, as
	// --events-addr: events go there as well as to Kubernetes. Empty:
	// Kubernetes events only.
	EventsAddr string
	// Logger is the manager's logger.
	Logger logr.Logger
}

// NewLocalManager returns the controller with local runners (child
// processes on loopback, with mTLS), without metrics, probes or leader
// election: controllers.NewManager, as cmd/controller calls it with
// --runner=local, for `landform dev` and tests.
func NewLocalManager(ctx context.Context, cfg *rest.Config, o ControllerOptions) (ctrl.Manager, error) {
	return app.NewManager(ctx, cfg, app.Config{
		Options: controllers.Options{MaxConcurrentReconciles: cmp.Or(o.Concurrent, 4)},
		Runner:  app.RunnerLocal,
		Local: runner.LocalOptions{
			Binary: o.RunnerBinary,
			Engine: o.Engine,
			Env:    o.RunnerEnv,
			Stdout: o.RunnerOutput,
			Stderr: o.RunnerOutput,
		},
		ProviderMirrors:    o.ProviderMirrors,
		WorkDir:            o.WorkDir,
		EventsAddr:         o.EventsAddr,
		Logger:             o.Logger,
		SkipNameValidation: true,
	})
}

// startController runs the Landform controller in this process, its log in
// logs/landform-controller.log and the runners' in logs/runners.log.
func (s *starter) startController() (string, error) {
	work := filepath.Join(s.StateDir, "controller")
	if err := os.MkdirAll(work, 0o700); err != nil {
		return "", err
	}
	logFile, err := openLog(s.logPath("landform-controller"))
	if err != nil {
		return "", err
	}
	runnerLog, err := openLog(s.logPath("runners"))
	if err != nil {
		logFile.Close()
		return "", err
	}
	closeLogs := func() { logFile.Close(); runnerLog.Close() }
	var env []string
	if s.CloudURL != "" {
		env = append(env, CloudEndpointEnv+"="+s.CloudURL)
	}
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := NewLocalManager(ctx, s.Config, ControllerOptions{
		WorkDir:         work,
		RunnerBinary:    s.runner,
		Engine:          s.o.Engine,
		ProviderMirrors: []string{filepath.Join(s.StateDir, "providers")},
		RunnerEnv:       env,
		RunnerOutput:    runnerLog,
		EventsAddr:      s.EventsURL,
		Logger:          zap.New(zap.WriteTo(logFile)),
	})
	if err != nil {
		cancel()
		closeLogs()
		return "", err
	}
	done := make(chan error, 1)
	go func() {
		err := mgr.Start(ctx)
		done <- err
		if ctx.Err() == nil {
			s.fail(fmt.Errorf("landform controller stopped: %v (see %s)", err, s.logPath("landform-controller")))
		}
	}()
	s.onStop("landform controller", func() error {
		defer closeLogs()
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(time.Minute):
			return fmt.Errorf("the landform controller did not stop within a minute")
		}
	})
	waitCtx, cancelWait := context.WithTimeout(s.ctx, startTimeout)
	defer cancelWait()
	if !mgr.GetCache().WaitForCacheSync(waitCtx) {
		return "", fmt.Errorf("the controller's cache did not sync (see %s)", s.logPath("landform-controller"))
	}
	return fmt.Sprintf("in-process, runner %s, engine %s", s.runner, s.o.Engine), nil
}
