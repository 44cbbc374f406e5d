// Package app assembles the Landform controller process: the scheme, the
// manager and its cache, the runner placement, the artifact cache and its
// pruner, the event recorder, and the reconciler of package controllers
// with its dependencies. cmd/controller and `landform dev`
// (internal/devenv) call the one constructor, NewManager, so the
// in-process controller of `landform dev` is the binary's, defaults
// included; the reconciler package holds no process wiring.
package app

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	helper "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/events"
	"github.com/fluxcd/pkg/runtime/jitter"
	"github.com/fluxcd/pkg/runtime/leaderelection"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/controllers"
	"github.com/landform-dev/landform/internal/custody"
	"github.com/landform-dev/landform/internal/inputs"
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/planstore"
	"github.com/landform-dev/landform/internal/runs"
	"github.com/landform-dev/landform/internal/source"
	"github.com/landform-dev/landform/runner"
)

// Runner placements (--runner).
const (
	RunnerPod   = "pod"
	RunnerLocal = "local"
)

// Config is what a controller process is built from: cmd/controller's
// flags, or what `landform dev` and the tests set. NewManager is the one
// constructor both use, so that the in-process controller of `landform dev`
// is the binary's, defaults included.
type Config struct {
	controllers.Options
	// ConcurrentRuns bounds the runs in flight (--concurrent-runs; 0:
	// runs.DefaultSlots).
	ConcurrentRuns int
	// Runner is where runners run: RunnerPod or RunnerLocal.
	Runner string
	// Local configures local runners; its WorkDir defaults to
	// <WorkDir>/runners and its ProviderMirrors to ProviderMirrors.
	Local runner.LocalOptions
	// Pod configures runner Pods.
	Pod PodRunners
	// ProviderMirrors are the runners' read-only provider mirrors (for
	// Pods, paths inside the runner image).
	ProviderMirrors []string
	// WorkDir holds the artifact cache, and local runners' kubeconfig and
	// directories.
	WorkDir string
	// ArtifactCache bounds the artifact cache (pruned in the background).
	ArtifactCache source.PruneOptions
	// DownloadTimeout bounds one artifact download (0: the default).
	DownloadTimeout time.Duration
	// ArtifactLimits bound one artifact's download and extracted files.
	ArtifactLimits source.SizeLimits
	// KeptArtifactMaxSize bounds the applied artifact kept for a destroy
	// without its source (--kept-artifact-max-size; custody.Keeper).
	KeptArtifactMaxSize int64
	// StateHistory is how many versions of an object's state are kept
	// before applies and destroys (--state-history; 0: the default,
	// negative: none; custody.Keeper).
	StateHistory int
	// Engines: see controllers.TerraformReconciler.
	Engines inputs.EngineSources
	// AllowCrossNamespaceRefs: see controllers.TerraformReconciler.
	AllowCrossNamespaceRefs bool
	// IntervalJitterPercentage spreads drift checks (0: none; below 100).
	IntervalJitterPercentage uint
	// EventsAddr is notification-controller's event endpoint; empty:
	// Kubernetes events only.
	EventsAddr string
	// MetricsAddr and HealthAddr serve metrics and probes ("0": none).
	MetricsAddr, HealthAddr string
	// LeaderElection elects one leader per WatchLabelSelector (Flux's
	// --enable-leader-election and --leader-election-* flags).
	LeaderElection leaderelection.Options
	// LeaderElectionNamespace holds the lease; empty: the Pod's own.
	LeaderElectionNamespace string
	// WatchLabelSelector restricts the cache to a shard's objects.
	WatchLabelSelector string
	// Logger is the manager's logger.
	Logger logr.Logger
	// SkipNameValidation lets one process build more than one manager
	// (tests, `make demo`): controller names are checked process-wide.
	SkipNameValidation bool
}

// PodRunners configure runner Pods.
type PodRunners struct {
	// Namespace is the controller's, which holds the runner CA Secret.
	Namespace string
	// Image is the runner image unless the object's template sets one.
	Image string
	// KeepPods keeps finished and failed runner Pods for debugging.
	KeepPods bool
	// Reuse keeps a recycled runner Pod this long for the next run of an
	// object of its namespace whose Pod would be the same (0: off).
	Reuse time.Duration
	// StartTimeout bounds a runner Pod's start.
	StartTimeout time.Duration
	// Policy narrows what objects may ask of their runner Pods.
	Policy placement.PodPolicy
}

// leaderElectionID is the lease of the main controller; a shard's is
// derived from it and its selector, as Flux's controllers do.
const leaderElectionID = "landform-controller.infra.landform.dev"

// NewManager builds the controller process: the scheme, a manager whose
// client reads Secrets and ConfigMaps uncached, the runner placement, the
// artifact cache and its pruner, the event recorder, and the reconciler
// set up with its watches and probes. The manager is started by the caller.
func NewManager(ctx context.Context, cfg *rest.Config, c Config) (ctrl.Manager, error) {
	log := c.Logger
	if log.GetSink() == nil {
		log = ctrl.Log
	}
	if c.IntervalJitterPercentage >= 100 {
		return nil, fmt.Errorf("--interval-jitter-percentage=%d: must be below 100", c.IntervalJitterPercentage)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, infrav1.AddToScheme, sourcev1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	// Sharding as Flux's controllers do it: the cache holds (and the
	// controller watches) only the shard's Terraform objects, and each
	// shard elects its own leader.
	watchSelector, err := helper.GetWatchSelector(helper.WatchOptions{LabelSelector: c.WatchLabelSelector})
	if err != nil {
		return nil, fmt.Errorf("--watch-label-selector=%q is not a valid label selector: %w", c.WatchLabelSelector, err)
	}
	electionID := leaderElectionID
	if c.WatchLabelSelector != "" {
		electionID = leaderelection.GenerateID(electionID, c.WatchLabelSelector)
		log.Info("reconciling one shard", "watchLabelSelector", c.WatchLabelSelector, "leaderElectionID", electionID)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Logger: log,
		// Secrets and ConfigMaps are read straight from the API server: the
		// controller never caches (or watches) every Secret in the cluster, and
		// a plan it just stored is never read back stale.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&infrav1.Terraform{}: {Label: watchSelector},
		}},
		Metrics:                 metricsserver.Options{BindAddress: orNone(c.MetricsAddr)},
		HealthProbeBindAddress:  orNone(c.HealthAddr),
		LeaderElection:          c.LeaderElection.Enable,
		LeaderElectionID:        electionID,
		LeaderElectionNamespace: c.LeaderElectionNamespace,
		// The manager stops after the run tracker drained (the tracker
		// needs leader election): the lease is held until local runs
		// drained, so no other replica starts runs for an object while
		// this one still has one.
		LeaderElectionReleaseOnCancel: c.LeaderElection.ReleaseOnCancel,
		LeaseDuration:                 nonZero(c.LeaderElection.LeaseDuration),
		RenewDeadline:                 nonZero(c.LeaderElection.RenewDeadline),
		RetryPeriod:                   nonZero(c.LeaderElection.RetryPeriod),
		GracefulShutdownTimeout:       ptr.To(runs.DefaultDrain + runner.DefaultInterruptGrace + 30*time.Second),
		Controller:                    config.Controller{SkipNameValidation: ptr.To(c.SkipNameValidation)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	placer, err := newPlacer(ctx, c, cfg, scheme, log)
	if err != nil {
		return nil, err
	}
	if pods, ok := placer.(*placement.Pod); ok {
		// Kept runner Pods end with the controller (--runner-pod-reuse).
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			<-ctx.Done()
			pods.EndKept(log.WithName("runners"))
			return nil
		})); err != nil {
			return nil, err
		}
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	fetcher := source.NewFetcher(filepath.Join(c.WorkDir, "artifacts"))
	fetcher.DownloadTimeout = c.DownloadTimeout
	fetcher.Limits = c.ArtifactLimits
	if err := mgr.Add(&source.Pruner{Fetcher: fetcher, Options: c.ArtifactCache, Log: log.WithName("artifact-cache")}); err != nil {
		return nil, err
	}
	recorder, err := events.NewRecorder(mgr, log.WithName("events"), c.EventsAddr, controllers.ControllerName)
	if err != nil {
		return nil, fmt.Errorf("--events-addr: %w", err)
	}
	notifier, err := controllers.NewNotifier(mgr.GetScheme(), log.WithName("events"), c.EventsAddr)
	if err != nil {
		return nil, fmt.Errorf("--events-addr: %w", err)
	}
	// The reconciler, its state keeper and its run tracker: the tracker
	// collects runs through the reconciler while the workers are stopped
	// (the drain), so it is given the reconciler once that exists.
	r := &controllers.TerraformReconciler{
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		EventRecorder:           recorder,
		Notifier:                notifier,
		Fetcher:                 fetcher,
		Plans:                   planstore.Store{Client: mgr.GetClient()},
		Placer:                  placer,
		AllowCrossNamespaceRefs: c.AllowCrossNamespaceRefs,
		Engines:                 c.Engines,
		Custody: &custody.Keeper{
			Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Objects: mgr.GetClient(), Namespaces: mgr.GetClient(),
			FieldOwner:   controllers.FieldOwner,
			HistoryLimit: c.StateHistory,
			Leases:       kube.CoordinationV1().Leases,
			Secrets:      kube.CoreV1().Secrets,
			Artifacts:    fetcher, ArtifactMaxSize: c.KeptArtifactMaxSize,
		},
	}
	r.Runs = runs.New(runs.Config{
		Placer:  placer,
		Tokens:  r.Custody,
		Unsaved: r.Custody.UnsavedStates(),
		Client:  mgr.GetClient(),
		Slots:   c.ConcurrentRuns,
		Collect: r,
		Log:     log.WithName("runs"),
	})
	if err := mgr.Add(r.Runs); err != nil {
		return nil, fmt.Errorf("adding the run tracker: %w", err)
	}
	if c.IntervalJitterPercentage > 0 {
		jitter.SetGlobalIntervalJitter(float64(c.IntervalJitterPercentage)/100, nil)
		r.Jitter = jitter.JitteredIntervalDuration
	}
	if err := r.SetupWithManager(ctx, mgr, c.Options); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}
