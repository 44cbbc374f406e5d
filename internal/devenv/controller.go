package devenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/fluxcd/pkg/runtime/events"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/controllers"
	"github.com/landform-dev/landform/internal/mtls"
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/planstore"
	"github.com/landform-dev/landform/internal/source"
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

// NewLocalManager returns a manager running the Terraform reconciler with
// local runners (child processes on loopback, with mTLS), without metrics,
// probes or leader election: the construction of cmd/controller for
// `--runner=local`, for `landform dev` and tests.
func NewLocalManager(ctx context.Context, cfg *rest.Config, o ControllerOptions) (ctrl.Manager, error) {
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, infrav1.AddToScheme, sourcev1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Logger: o.Logger,
		// As cmd/controller: Secrets and ConfigMaps are read uncached.
		Client:                 client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// A process may start and stop the environment more than once
		// (tests, `make demo`); controller names are checked process-wide.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	// The CA lives only in this process: local runners are its children.
	ca, err := mtls.NewCA("landform-local-runners", 365*24*time.Hour)
	if err != nil {
		return nil, fmt.Errorf("creating the runner CA: %w", err)
	}
	kubeconfig := filepath.Join(o.WorkDir, "runner-kubeconfig")
	if err := placement.WriteKubeconfig(cfg, kubeconfig); err != nil {
		return nil, fmt.Errorf("writing the runners' kubeconfig: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	recorder, err := events.NewRecorder(mgr, o.Logger.WithName("events"), o.EventsAddr, controllers.ControllerName)
	if err != nil {
		return nil, fmt.Errorf("events address: %w", err)
	}
	r := &controllers.TerraformReconciler{
		Leases:        kube.CoordinationV1().Leases,
		Client:        mgr.GetClient(),
		EventRecorder: recorder,
		Fetcher:       source.NewFetcher(filepath.Join(o.WorkDir, "artifacts")),
		Plans:         planstore.Store{Client: mgr.GetClient()},
		Placer: &placement.Local{
			CA:         ca,
			Kubeconfig: kubeconfig,
			Options: runner.LocalOptions{
				Binary:          o.RunnerBinary,
				Engine:          o.Engine,
				WorkDir:         filepath.Join(o.WorkDir, "runners"),
				ProviderMirrors: o.ProviderMirrors,
				Env:             o.RunnerEnv,
				Stdout:          o.RunnerOutput,
				Stderr:          o.RunnerOutput,
			},
		},
	}
	concurrent := o.Concurrent
	if concurrent == 0 {
		concurrent = 4
	}
	if err := r.SetupWithManager(ctx, mgr, controllers.Options{MaxConcurrentReconciles: concurrent}); err != nil {
		return nil, err
	}
	return mgr, nil
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
