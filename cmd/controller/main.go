// Command landform-controller reconciles Terraform objects.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	helper "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/events"
	"github.com/fluxcd/pkg/runtime/jitter"
	"github.com/fluxcd/pkg/runtime/leaderelection"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/controllers"
	"github.com/landform-dev/landform/internal/certs"
	"github.com/landform-dev/landform/internal/keptartifact"
	"github.com/landform-dev/landform/internal/mtls"
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/planstore"
	"github.com/landform-dev/landform/internal/source"
	"github.com/landform-dev/landform/internal/version"
	"github.com/landform-dev/landform/runner"
)

type flags struct {
	metricsAddr, healthAddr string
	eventsAddr              string
	leaderElect             bool
	watchLabelSelector      string
	intervalJitter          uint
	concurrent              int
	concurrentRuns          int
	drainTimeout            time.Duration
	artifactMaxAge          time.Duration
	artifactMaxSize         int64
	downloadTimeout         time.Duration
	keptArtifactMaxSize     int64
	runnerMode              string
	runnerBinary, engine    string
	workDir                 string
	providerMirrors         stringList
	allowCrossNamespace     bool
	// Runner Pods.
	namespace          string
	runnerImage        string
	keepRunnerPods     bool
	runnerStartTimeout time.Duration
	// Runner lockdown.
	defaultServiceAccount        string
	enforceDefaultServiceAccount bool
	allowedRunnerImages          string
}

type stringList []string

func (s *stringList) String() string     { return fmt.Sprint(*s) }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	var f flags
	flag.StringVar(&f.metricsAddr, "metrics-addr", ":8080", "address of the Prometheus metrics endpoint")
	flag.StringVar(&f.healthAddr, "health-addr", ":8081", "address of the health and readiness probes")
	flag.StringVar(&f.eventsAddr, "events-addr", "", "notification-controller's event endpoint (http://notification-controller.flux-system.svc.cluster.local./ in a Flux installation): events go there as well as to Kubernetes, for Flux Alerts on Terraform objects (empty: Kubernetes events only)")
	flag.BoolVar(&f.leaderElect, "leader-elect", false, "elect a leader so that only one replica reconciles")
	flag.StringVar(&f.watchLabelSelector, "watch-label-selector", "", "reconcile only the Terraform objects whose labels match this Kubernetes label selector, as Flux's controllers shard: 'sharding.fluxcd.io/key in (shard1)' on a shard, '!sharding.fluxcd.io/key' on the main controller (empty: all objects); a non-empty selector also gives the shard its own leader election lease")
	flag.UintVar(&f.intervalJitter, "interval-jitter-percentage", 5, "spread drift checks: each object's next check comes up to this percentage of its interval earlier or later, as Flux's controllers jitter their intervals, so that objects planned together do not check together again (0: no jitter; below 100)")
	flag.IntVar(&f.concurrent, "concurrent", 4, "Terraform objects reconciled in parallel (a reconcile only starts or inspects a run, so it is short)")
	flag.IntVar(&f.concurrentRuns, "concurrent-runs", controllers.DefaultConcurrentRuns, "runs (plan, apply, destroy) in flight at once; more wait, approvals, requested reconciles, new objects and deletions ahead of drift checks")
	flag.DurationVar(&f.drainTimeout, "drain-timeout", controllers.DefaultDrainTimeout, "on SIGTERM with --runner=local, how long runs in flight may take to finish before they are interrupted gracefully (runner Pods carry on without the controller)")
	flag.StringVar(&f.runnerMode, "runner", defaultRunnerMode(), "where runners run: pod (one Pod per run; the default in a cluster) or local (child processes; the default elsewhere)")
	flag.StringVar(&f.runnerImage, "runner-image", "ghcr.io/landform-dev/landform-runner:"+version.Version, "runner image for --runner=pod, unless spec.runnerPodTemplate sets one")
	flag.StringVar(&f.namespace, "namespace", envOr("POD_NAMESPACE", "landform-system"), "the controller's namespace, which holds the runner CA Secret")
	flag.BoolVar(&f.keepRunnerPods, "keep-runner-pods", false, "keep runner Pods after their run, and those that failed to start, for debugging")
	flag.DurationVar(&f.runnerStartTimeout, "runner-start-timeout", placement.DefaultStartTimeout, "how long a runner Pod may take to run and answer")
	flag.StringVar(&f.defaultServiceAccount, "default-service-account", (&infrav1.Terraform{}).GetServiceAccountName(), "ServiceAccount of the runner Pods of objects that set no spec.serviceAccountName")
	flag.BoolVar(&f.enforceDefaultServiceAccount, "enforce-default-service-account", false, "refuse objects whose spec.serviceAccountName names another ServiceAccount than --default-service-account")
	flag.StringVar(&f.allowedRunnerImages, "allowed-runner-images", "", "comma-separated image prefixes that spec.runnerPodTemplate.spec.image must be under (empty: any image; --runner-image is always allowed); a prefix ends at '/', ':' or '@': ghcr.io/acme allows ghcr.io/acme/runner:v1, not ghcr.io/acmeevil/x")
	flag.DurationVar(&f.artifactMaxAge, "artifact-cache-max-age", 24*time.Hour, "remove cached artifacts no run used for this long (0: no age bound)")
	flag.Int64Var(&f.artifactMaxSize, "artifact-cache-max-size", 2<<30, "bytes the artifact cache may hold; the least recently used artifacts go first (0: no size bound; artifacts used within the last hour are always kept)")
	flag.DurationVar(&f.downloadTimeout, "artifact-download-timeout", source.DefaultDownloadTimeout, "bound on downloading one artifact, retries included")
	flag.Int64Var(&f.keptArtifactMaxSize, "kept-artifact-max-size", keptartifact.DefaultMaxSize, "bytes of the largest applied artifact kept (in Secrets owned by the Terraform object) to destroy with after its source is gone; a larger one is not kept (negative: keep none)")
	flag.StringVar(&f.runnerBinary, "runner-binary", "landform-runner", "runner binary for --runner=local")
	flag.StringVar(&f.engine, "engine", "", "terraform or tofu binary for local runners (default: tofu, else terraform, on PATH)")
	flag.StringVar(&f.workDir, "work-dir", filepath.Join(os.TempDir(), "landform"), "directory for the artifact cache and local runners")
	flag.BoolVar(&f.allowCrossNamespace, "allow-cross-namespace-refs", false, "let sourceRef and dependsOn name objects in other namespaces")
	flag.Var(&f.providerMirrors, "provider-mirror", "read-only provider filesystem mirror for runners (repeatable; with --runner=pod, a path inside the runner image)")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))

	if err := run(f); err != nil {
		ctrl.Log.Error(err, "landform-controller failed")
		os.Exit(1)
	}
}

func run(f flags) error {
	log := ctrl.Log.WithName("setup")
	log.Info("starting landform-controller", "version", version.Version, "runner", f.runnerMode)

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, infrav1.AddToScheme, sourcev1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	// Sharding as Flux's controllers do it: the cache holds (and the
	// controller watches) only the shard's Terraform objects, and each
	// shard elects its own leader.
	if f.intervalJitter >= 100 {
		return fmt.Errorf("--interval-jitter-percentage=%d: must be below 100", f.intervalJitter)
	}
	watchOpts := helper.WatchOptions{LabelSelector: f.watchLabelSelector}
	watchSelector, err := helper.GetWatchSelector(watchOpts)
	if err != nil {
		return fmt.Errorf("--watch-label-selector=%q is not a valid label selector: %w", f.watchLabelSelector, err)
	}
	leaderElectionID := "landform-controller.infra.landform.dev"
	if f.watchLabelSelector != "" {
		leaderElectionID = leaderelection.GenerateID(leaderElectionID, f.watchLabelSelector)
		log.Info("reconciling one shard", "watchLabelSelector", f.watchLabelSelector, "leaderElectionID", leaderElectionID)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("no kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		// Secrets and ConfigMaps are read straight from the API server: the
		// controller never caches (or watches) every Secret in the cluster, and
		// a plan it just stored is never read back stale.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&infrav1.Terraform{}: {Label: watchSelector},
		}},
		Metrics:                metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress: f.healthAddr,
		LeaderElection:         f.leaderElect,
		LeaderElectionID:       leaderElectionID,
		// In a cluster the Pod's namespace (the default); outside one,
		// POD_NAMESPACE names it (controller-runtime finds none).
		LeaderElectionNamespace: os.Getenv("POD_NAMESPACE"),
		// Hold the leader lease until local runs drained: no other
		// replica starts runs for an object while this one still has one.
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       ptrTo(f.drainTimeout + runner.DefaultInterruptGrace + 30*time.Second),
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	placer, err := newPlacer(ctx, f, cfg, scheme)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	fetcher := source.NewFetcher(filepath.Join(f.workDir, "artifacts"))
	fetcher.DownloadTimeout = f.downloadTimeout
	if err := mgr.Add(&source.Pruner{
		Fetcher: fetcher,
		Options: source.PruneOptions{MaxAge: f.artifactMaxAge, MaxSize: f.artifactMaxSize},
		Log:     mgr.GetLogger().WithName("artifact-cache"),
	}); err != nil {
		return err
	}
	recorder, err := events.NewRecorder(mgr, ctrl.Log.WithName("events"), f.eventsAddr, controllers.ControllerName)
	if err != nil {
		return fmt.Errorf("--events-addr: %w", err)
	}
	r := &controllers.TerraformReconciler{
		Client:        mgr.GetClient(),
		EventRecorder: recorder,
		Fetcher:       fetcher,
		Plans:         planstore.Store{Client: mgr.GetClient()},
		Placer:        placer,
		Leases:        kube.CoordinationV1().Leases,

		AllowCrossNamespaceRefs: f.allowCrossNamespace,
		KeptArtifactMaxSize:     f.keptArtifactMaxSize,
	}
	if f.intervalJitter > 0 {
		jitter.SetGlobalIntervalJitter(float64(f.intervalJitter)/100, nil)
		r.Jitter = jitter.JitteredIntervalDuration
	}
	if err := r.SetupWithManager(ctx, mgr, controllers.Options{
		MaxConcurrentReconciles: f.concurrent,
		MaxConcurrentRuns:       f.concurrentRuns,
		DrainTimeout:            f.drainTimeout,
	}); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// newPlacer builds the runner placement the flags ask for.
func newPlacer(ctx context.Context, f flags, cfg *rest.Config, scheme *runtime.Scheme) (placement.Placer, error) {
	switch f.runnerMode {
	case "pod":
		// Not the manager's client: a cache would watch every Pod and
		// ServiceAccount in the cluster; runner Pods are read one by one.
		c, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return nil, err
		}
		cm, err := certs.New(ctx, c, certs.Options{Namespace: f.namespace})
		if err != nil {
			return nil, fmt.Errorf("loading the runner CA: %w", err)
		}
		return &placement.Pod{
			Client:          c,
			Certs:           cm,
			Image:           f.runnerImage,
			KeepPods:        f.keepRunnerPods,
			StartTimeout:    f.runnerStartTimeout,
			ProviderMirrors: f.providerMirrors,
			Policy: placement.PodPolicy{
				DefaultServiceAccount:        f.defaultServiceAccount,
				EnforceDefaultServiceAccount: f.enforceDefaultServiceAccount,
				AllowedImages:                placement.ParseImagePrefixes(f.allowedRunnerImages),
			},
		}, nil
	case "local":
		// The CA lives only in this process: local runners are its children.
		ca, err := mtls.NewCA("landform-local-runners", 365*24*time.Hour)
		if err != nil {
			return nil, fmt.Errorf("creating the runner CA: %w", err)
		}
		kubeconfig := filepath.Join(f.workDir, "runner-kubeconfig")
		if err := placement.WriteKubeconfig(cfg, kubeconfig); err != nil {
			return nil, fmt.Errorf("writing the runners' kubeconfig: %w", err)
		}
		local := &placement.Local{
			CA:         ca,
			Kubeconfig: kubeconfig,
			Options: runner.LocalOptions{
				Binary:          f.runnerBinary,
				Engine:          f.engine,
				WorkDir:         filepath.Join(f.workDir, "runners"),
				ProviderMirrors: f.providerMirrors,
				Stdout:          os.Stderr,
				Stderr:          os.Stderr,
			},
		}
		// Runners of an earlier controller process ended with it.
		if err := local.RemoveStale(); err != nil {
			ctrl.Log.Error(err, "removing the directories of earlier local runners")
		}
		return local, nil
	default:
		return nil, fmt.Errorf("--runner=%s is not supported: use --runner=pod or --runner=local", f.runnerMode)
	}
}

// defaultRunnerMode runs runners in Pods when the controller itself runs in
// a cluster, and as child processes elsewhere.
func defaultRunnerMode() string {
	if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		return "pod"
	}
	return "local"
}

func ptrTo[T any](v T) *T { return &v }

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
