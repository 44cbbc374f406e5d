// Command landform-controller reconciles Terraform objects.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/controllers"
	"github.com/landform-dev/landform/internal/keptartifact"
	"github.com/landform-dev/landform/internal/placement"
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
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("no kubeconfig: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	mgr, err := controllers.NewManager(ctx, cfg, controllers.Config{
		Options: controllers.Options{
			MaxConcurrentReconciles: f.concurrent,
			MaxConcurrentRuns:       f.concurrentRuns,
			DrainTimeout:            f.drainTimeout,
		},
		Runner: f.runnerMode,
		Local: runner.LocalOptions{
			Binary: f.runnerBinary,
			Engine: f.engine,
			Stdout: os.Stderr,
			Stderr: os.Stderr,
		},
		Pod: controllers.PodRunners{
			Namespace:    f.namespace,
			Image:        f.runnerImage,
			KeepPods:     f.keepRunnerPods,
			StartTimeout: f.runnerStartTimeout,
			Policy: placement.PodPolicy{
				DefaultServiceAccount:        f.defaultServiceAccount,
				EnforceDefaultServiceAccount: f.enforceDefaultServiceAccount,
				AllowedImages:                placement.ParseImagePrefixes(f.allowedRunnerImages),
			},
		},
		ProviderMirrors:          f.providerMirrors,
		WorkDir:                  f.workDir,
		ArtifactCache:            source.PruneOptions{MaxAge: f.artifactMaxAge, MaxSize: f.artifactMaxSize},
		DownloadTimeout:          f.downloadTimeout,
		KeptArtifactMaxSize:      f.keptArtifactMaxSize,
		AllowCrossNamespaceRefs:  f.allowCrossNamespace,
		IntervalJitterPercentage: f.intervalJitter,
		EventsAddr:               f.eventsAddr,
		MetricsAddr:              f.metricsAddr,
		HealthAddr:               f.healthAddr,
		LeaderElection:           f.leaderElect,
		// In a cluster the Pod's namespace (the default); outside one,
		// POD_NAMESPACE names it (controller-runtime finds none).
		LeaderElectionNamespace: os.Getenv("POD_NAMESPACE"),
		WatchLabelSelector:      f.watchLabelSelector,
		Logger:                  ctrl.Log,
	})
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// defaultRunnerMode runs runners in Pods when the controller itself runs in
// a cluster, and as child processes elsewhere.
func defaultRunnerMode() string {
	if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		return "pod"
	}
	return "local"
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
