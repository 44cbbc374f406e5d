// Command landform-controller reconciles Terraform objects.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/controllers"
	"github.com/landform-dev/landform/internal/mtls"
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/planstore"
	"github.com/landform-dev/landform/internal/source"
	"github.com/landform-dev/landform/internal/version"
	"github.com/landform-dev/landform/runner"
)

type flags struct {
	metricsAddr, healthAddr string
	leaderElect             bool
	concurrent              int
	runnerMode              string
	runnerBinary, engine    string
	workDir                 string
	providerMirrors         stringList
	allowCrossNamespace     bool
}

type stringList []string

func (s *stringList) String() string     { return fmt.Sprint(*s) }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	var f flags
	flag.StringVar(&f.metricsAddr, "metrics-addr", ":8080", "address of the Prometheus metrics endpoint")
	flag.StringVar(&f.healthAddr, "health-addr", ":8081", "address of the health and readiness probes")
	flag.BoolVar(&f.leaderElect, "leader-elect", false, "elect a leader so that only one replica reconciles")
	flag.IntVar(&f.concurrent, "concurrent", 4, "Terraform objects reconciled in parallel")
	flag.StringVar(&f.runnerMode, "runner", "local", "where runners run: local (child processes)")
	flag.StringVar(&f.runnerBinary, "runner-binary", "landform-runner", "runner binary for --runner=local")
	flag.StringVar(&f.engine, "engine", "", "terraform or tofu binary for local runners (default: tofu, else terraform, on PATH)")
	flag.StringVar(&f.workDir, "work-dir", filepath.Join(os.TempDir(), "landform"), "directory for the artifact cache and local runners")
	flag.BoolVar(&f.allowCrossNamespace, "allow-cross-namespace-refs", false, "let sourceRef and dependsOn name objects in other namespaces")
	flag.Var(&f.providerMirrors, "provider-mirror", "read-only provider filesystem mirror for runners (repeatable)")
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
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("no kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		// Secrets and ConfigMaps are read straight from the API server: the
		// controller never caches (or watches) every Secret in the cluster, and
		// a plan it just stored is never read back stale.
		Client:                 client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}},
		Metrics:                metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress: f.healthAddr,
		LeaderElection:         f.leaderElect,
		LeaderElectionID:       "landform-controller.infra.landform.dev",
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	placer, err := newPlacer(f, cfg)
	if err != nil {
		return err
	}
	r := &controllers.TerraformReconciler{
		Client:        mgr.GetClient(),
		EventRecorder: mgr.GetEventRecorderFor("landform-controller"),
		Fetcher:       source.NewFetcher(filepath.Join(f.workDir, "artifacts")),
		Plans:         planstore.Store{Client: mgr.GetClient()},
		Placer:        placer,

		AllowCrossNamespaceRefs: f.allowCrossNamespace,
	}
	ctx := ctrl.SetupSignalHandler()
	if err := r.SetupWithManager(ctx, mgr, controllers.Options{MaxConcurrentReconciles: f.concurrent}); err != nil {
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
func newPlacer(f flags, cfg *rest.Config) (placement.Placer, error) {
	switch f.runnerMode {
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
		return &placement.Local{
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
		}, nil
	default:
		return nil, fmt.Errorf("--runner=%s is not supported: use --runner=local", f.runnerMode)
	}
}
