package testenv

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Installation is a real cluster with Landform's chart installed, as the
// suites that run against one (e2e/, e2e/cluster) reach it.
type Installation struct {
	Config *rest.Config
	// Client knows the Kubernetes, Landform and Flux source types.
	Client client.WithWatch
	// Namespace is the runner namespace the suite uses; ControllerNamespace
	// is where the controller runs.
	Namespace, ControllerNamespace string
	// Timeout bounds each wait of the suite, polled every Interval.
	Timeout, Interval time.Duration
}

// InstallationSuite is the setup that the suites against an installation
// share: it reads where the installation is from environment variables,
// connects (ConnectInstallation) once for all the suite's tests, and then
// runs the suite's own Setup once.
type InstallationSuite[T any] struct {
	// Name says which suite in messages ("e2e").
	Name string
	// KubeconfigEnv names the variable holding the cluster's kubeconfig;
	// without it every test skips, saying Hint.
	KubeconfigEnv, Hint string
	// NamespaceEnv names the variable holding a runner namespace of the
	// installation (the chart's runner.namespaces), DefaultNamespace when
	// unset.
	NamespaceEnv, DefaultNamespace string
	// ControllerNamespaceEnv names the variable holding the controller's
	// namespace, landform-system when unset.
	ControllerNamespaceEnv string
	// TimeoutEnv names the variable bounding each wait (a Go duration),
	// 5m when unset.
	TimeoutEnv string
	// Interval is how often waits poll.
	Interval time.Duration
	// Setup prepares the rest of what the tests share, once.
	Setup func(context.Context, *Installation) (T, error)

	once   sync.Once
	shared T
	err    error
}

// Connect returns what Setup made, setting the suite up at the first call;
// it skips t when the kubeconfig variable is unset.
func (s *InstallationSuite[T]) Connect(t testing.TB) T {
	t.Helper()
	kubeconfig := os.Getenv(s.KubeconfigEnv)
	if kubeconfig == "" {
		t.Skipf("%s is not set: %s", s.KubeconfigEnv, s.Hint)
	}
	s.once.Do(func() { s.shared, s.err = s.setup(kubeconfig) })
	if s.err != nil {
		t.Fatalf("%s setup: %v", s.Name, s.err)
	}
	return s.shared
}

func (s *InstallationSuite[T]) setup(kubeconfig string) (T, error) {
	var zero T
	timeout, err := time.ParseDuration(EnvOr(s.TimeoutEnv, "5m"))
	if err != nil {
		return zero, fmt.Errorf("%s: %w", s.TimeoutEnv, err)
	}
	ctx := context.Background()
	ns, controllerNS := EnvOr(s.NamespaceEnv, s.DefaultNamespace), EnvOr(s.ControllerNamespaceEnv, "landform-system")
	inst, err := ConnectInstallation(ctx, kubeconfig, controllerNS, ns, timeout, s.Interval)
	if err != nil {
		return zero, fmt.Errorf("%s=%s: %w", s.KubeconfigEnv, kubeconfig, err)
	}
	return s.Setup(ctx, inst)
}

// The chart's names the suites check.
const (
	controllerDeployment = "landform-controller"
	runnerServiceAccount = "landform-runner"
)

// ConnectInstallation reaches the cluster of kubeconfig and checks that
// Landform is installed there: the controller Deployment in controllerNS
// becomes available within timeout (polled every interval), and the
// runner namespace runnerNS has the runner ServiceAccount.
func ConnectInstallation(ctx context.Context, kubeconfig, controllerNS, runnerNS string, timeout, interval time.Duration) (*Installation, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	if err := Poll(ctx, timeout, interval, "the controller Deployment to be available", func() (bool, string, error) {
		var dep appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: controllerNS, Name: controllerDeployment}, &dep); err != nil {
			return false, "", err
		}
		for _, cond := range dep.Status.Conditions {
			if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%+v", dep.Status.Conditions), nil
	}); err != nil {
		return nil, fmt.Errorf("is Landform installed in %s? %w", controllerNS, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: runnerNS, Name: runnerServiceAccount}, &corev1.ServiceAccount{}); err != nil {
		return nil, fmt.Errorf("the runner namespace %s has no ServiceAccount %s (install the chart with runner.namespaces={%s}): %w",
			runnerNS, runnerServiceAccount, runnerNS, err)
	}
	return &Installation{Config: cfg, Client: c, Namespace: runnerNS, ControllerNamespace: controllerNS, Timeout: timeout, Interval: interval}, nil
}
