// Command landform-controller reconciles Terraform objects.
package main

import (
	goflag "flag"
	"fmt"
	"os"

	runtimeclient "github.com/fluxcd/pkg/runtime/client"
	"github.com/fluxcd/pkg/runtime/logger"
	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/landform-dev/landform/controllers"
	"github.com/landform-dev/landform/internal/app"
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/source"
	"github.com/landform-dev/landform/internal/version"
	"github.com/landform-dev/landform/runner"
)

func main() {
	f := bindFlags(pflag.CommandLine)
	// controller-runtime's --kubeconfig.
	pflag.CommandLine.AddGoFlagSet(goflag.CommandLine)
	pflag.Parse()
	f.applyAliases(pflag.CommandLine)
	if err := f.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "landform-controller:", err)
		os.Exit(2)
	}
	ctrl.SetLogger(logger.NewLogger(f.log))
	for _, w := range f.deprecated(pflag.CommandLine) {
		ctrl.Log.Info(w)
	}
	if err := run(f); err != nil {
		ctrl.Log.Error(err, "landform-controller failed")
		os.Exit(1)
	}
}

func run(f *flags) error {
	log := ctrl.Log.WithName("setup")
	log.Info("starting landform-controller", "version", version.Version, "runner", f.runnerMode)
	if f.runnerMode == app.RunnerLocal && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		// This controller serves every namespace; local runners run each
		// module as this process's user, with its credentials.
		log.Info("warning: --runner=local is no tenancy boundary: every module runs as this controller's user, with its credentials (every namespace's Secrets) and beside every other run; use --runner=pod where more than one team's namespaces are served (docs/security.md#local-runners)")
	}
	// Flux's: --kube-api-qps and --kube-api-burst, or no client-side
	// throttling when the API server has priority and fairness.
	cfg := runtimeclient.GetConfigOrDie(f.client)
	ctx := ctrl.SetupSignalHandler()
	engineSources, err := f.engineSources()
	if err != nil {
		return err
	}
	mgr, err := app.NewManager(ctx, cfg, app.Config{
		Options:        controllers.Options{MaxConcurrentReconciles: f.concurrent},
		ConcurrentRuns: f.concurrentRuns,
		Runner:         f.runnerMode,
		Local: runner.LocalOptions{
			Binary: f.runnerBinary,
			Engine: f.engine,
			// Local runners outlive the controller, as runner Pods do.
			Detach: true,
		},
		Pod: app.PodRunners{
			Namespace:    f.namespace,
			Image:        f.runnerImage,
			KeepPods:     f.keepRunnerPods,
			Reuse:        f.runnerPodReuse,
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
		ArtifactLimits:           source.SizeLimits{Download: artifactBound(f.downloadMaxSize), Extracted: artifactBound(f.extractedMaxSize)},
		KeptArtifactMaxSize:      f.keptArtifactMaxSize,
		StateHistory:             stateHistory(f.stateHistory),
		Engines:                  engineSources,
		AllowCrossNamespaceRefs:  !f.acl.NoCrossNamespaceRefs,
		IntervalJitterPercentage: uint(f.jitter.Percentage),
		EventsAddr:               f.eventsAddr,
		MetricsAddr:              f.metricsAddr,
		HealthAddr:               f.healthAddr,
		LeaderElection:           f.leaderElection,
		// In a cluster the Pod's namespace (the default); outside one,
		// POD_NAMESPACE names it (controller-runtime finds none).
		LeaderElectionNamespace: os.Getenv("POD_NAMESPACE"),
		WatchLabelSelector:      f.watch.LabelSelector,
		Logger:                  ctrl.Log,
	})
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// artifactBound maps --artifact-download-max-size and
// --artifact-extracted-max-size (0 or negative: no bound) onto
// source.SizeLimits (0: the default, negative: no bound).
func artifactBound(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}

// stateHistory maps --state-history (0: none) onto Config.StateHistory
// (0: the default, negative: none).
func stateHistory(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}
