package cluster

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/testenv"
)

// What the suite needs from e2e/cluster/e2e.sh.
const (
	// envKubeconfig names the cluster; without it every test skips.
	envKubeconfig = "LANDFORM_CLUSTER_KUBECONFIG"
	// envNamespace is a runner namespace of the chart installation
	// (runner.namespaces). Default "e2e-cluster".
	envNamespace = "LANDFORM_CLUSTER_NAMESPACE"
	// envControllerNamespace is the chart's release namespace. Default
	// "landform-system".
	envControllerNamespace = "LANDFORM_CLUSTER_CONTROLLER_NAMESPACE"
	// envTimeout bounds each wait (a Go duration). Default 5m.
	envTimeout = "LANDFORM_CLUSTER_TIMEOUT"
)

const runnerSA = "landform-runner"

// env is the cluster and what the suite set up in it.
type env struct {
	client       client.WithWatch
	kube         kubernetes.Interface // for what client lacks: logs, typed Leases
	ns           string
	controllerNS string
	node         *corev1.Node
	nodeIP       string
	timeout      time.Duration
	platform     *platform
}

var (
	setupOnce sync.Once
	shared    *env
	setupErr  error
)

// connect returns the cluster, skipping the test when none is given.
func connect(t *testing.T) *env {
	t.Helper()
	kc := os.Getenv(envKubeconfig)
	if kc == "" {
		t.Skipf("%s is not set: this suite needs the single-node cluster of `make cluster-up` and runs with `make e2e-cluster` (e2e/cluster/README.md)", envKubeconfig)
	}
	setupOnce.Do(func() { shared, setupErr = setup(kc) })
	if setupErr != nil {
		t.Fatalf("cluster e2e setup: %v", setupErr)
	}
	return shared
}

func setup(kubeconfig string) (*env, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w", envKubeconfig, kubeconfig, err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, infrav1.AddToScheme, sourcev1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	timeout, err := time.ParseDuration(testenv.EnvOr(envTimeout, "5m"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envTimeout, err)
	}
	e := &env{
		client:       c,
		kube:         kube,
		ns:           testenv.EnvOr(envNamespace, "e2e-cluster"),
		controllerNS: testenv.EnvOr(envControllerNamespace, "landform-system"),
		timeout:      timeout,
	}
	ctx := context.Background()

	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return nil, err
	}
	if len(nodes.Items) != 1 {
		return nil, fmt.Errorf("want the one node of `make cluster-up`, found %d", len(nodes.Items))
	}
	e.node = &nodes.Items[0]
	for _, a := range e.node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			e.nodeIP = a.Address
		}
	}
	if e.nodeIP == "" {
		return nil, fmt.Errorf("node %s has no InternalIP", e.node.Name)
	}

	if err := e.poll(ctx, "the controller Deployment to be available", func() (bool, string, error) {
		var dep appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: e.controllerNS, Name: "landform-controller"}, &dep); err != nil {
			return false, "", err
		}
		for _, cond := range dep.Status.Conditions {
			if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%+v", dep.Status.Conditions), nil
	}); err != nil {
		return nil, fmt.Errorf("is Landform installed in %s (e2e/cluster/e2e.sh does it)? %w", e.controllerNS, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: runnerSA}, &corev1.ServiceAccount{}); err != nil {
		return nil, fmt.Errorf("the runner namespace %s has no ServiceAccount %s (install the chart with runner.namespaces={%s}): %w", e.ns, runnerSA, e.ns, err)
	}

	if e.platform, err = newPlatform(); err != nil {
		return nil, err
	}
	return e, nil
}

// poll calls check every second until it returns true, fails or the
// timeout passes; the error then carries check's last description.
func (e *env) poll(ctx context.Context, what string, check func() (bool, string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	var last string
	for {
		ok, desc, err := check()
		switch {
		case ok:
			return nil
		case err != nil && !apierrors.IsNotFound(err):
			return fmt.Errorf("waiting for %s: %w", what, err)
		case err != nil:
			desc = err.Error()
		}
		last = desc
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after %s waiting for %s; last seen: %s", e.timeout, what, last)
		case <-time.After(time.Second):
		}
	}
}

// gitRepository pushes files to a new repository of the git server and
// creates a GitRepository of it, which the real source-controller clones.
func (e *env) gitRepository(t *testing.T, name string, files map[string]string) *sourcev1.GitRepository {
	t.Helper()
	return e.gitRepositoryIn(t, e.ns, name, files)
}

// gitRepositoryIn is gitRepository in namespace ns.
func (e *env) gitRepositoryIn(t *testing.T, ns, name string, files map[string]string) *sourcev1.GitRepository {
	t.Helper()
	return e.fluxGitRepository(t, ns, name, e.platform.seedRepository(t, ns+"-"+name, files))
}

func keyOf(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

// terraform creates a Terraform object in the runner namespace and, when
// the test ends, deletes it and waits until it is gone (destroyed).
func (e *env) terraform(t *testing.T, tf *infrav1.Terraform) *infrav1.Terraform {
	t.Helper()
	tf.Namespace = e.ns
	e.deleteAndWait(t, tf)
	if err := e.client.Create(context.Background(), tf); err != nil {
		t.Fatalf("creating Terraform %s: %v", tf.Name, err)
	}
	t.Cleanup(func() { e.deleteAndWait(t, tf) })
	return tf
}

func (e *env) deleteAndWait(t *testing.T, tf *infrav1.Terraform) {
	t.Helper()
	ctx := context.Background()
	if err := e.client.Delete(ctx, tf); apierrors.IsNotFound(err) {
		return
	} else if err != nil {
		t.Errorf("deleting Terraform %s: %v", tf.Name, err)
		return
	}
	if err := e.poll(ctx, "Terraform "+tf.Name+" to be gone", func() (bool, string, error) {
		var cur infrav1.Terraform
		err := e.client.Get(ctx, client.ObjectKeyFromObject(tf), &cur)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, describe(&cur), client.IgnoreNotFound(err)
	}); err != nil {
		t.Error(err)
	}
}

// deleteLeftovers deletes what an earlier, interrupted run left behind:
// the Terraform object called name (destroying what it holds), then its
// state Secret, its lock Lease and other Secrets.
func (e *env) deleteLeftovers(t *testing.T, name, state string, secrets ...string) {
	t.Helper()
	ctx := context.Background()
	e.deleteAndWait(t, &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}})
	objs := []client.Object{&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "lock-" + state}}}
	for _, s := range append([]string{state}, secrets...) {
		objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: s}})
	}
	for _, o := range objs {
		if err := e.client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting the leftover %T %s: %v", o, o.GetName(), err)
		}
	}
}

// waitForTerraform polls the object until check accepts it.
func (e *env) waitForTerraform(t *testing.T, tf *infrav1.Terraform, what string, check func(*infrav1.Terraform) bool) *infrav1.Terraform {
	t.Helper()
	ctx := context.Background()
	cur := &infrav1.Terraform{}
	if err := e.poll(ctx, "Terraform "+tf.Name+": "+what, func() (bool, string, error) {
		if err := e.client.Get(ctx, client.ObjectKeyFromObject(tf), cur); err != nil {
			return false, "", err
		}
		return check(cur), describe(cur), nil
	}); err != nil {
		t.Fatal(err)
	}
	return cur
}

// ready returns the Ready condition, if it speaks of the current
// generation. (A failure being retried leaves status.observedGeneration
// behind, as kstatus wants, but its condition is current.)
func ready(tf *infrav1.Terraform) *metav1.Condition {
	c := apimeta.FindStatusCondition(tf.Status.Conditions, meta.ReadyCondition)
	if c == nil || c.ObservedGeneration != tf.Generation {
		return nil
	}
	if c.Status == metav1.ConditionTrue && tf.Status.ObservedGeneration != tf.Generation {
		return nil
	}
	return c
}

func describe(tf *infrav1.Terraform) string {
	var parts []string
	for _, c := range tf.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("generation %d observed %d; %s", tf.Generation, tf.Status.ObservedGeneration, strings.Join(parts, "; "))
}
