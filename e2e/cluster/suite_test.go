package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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

// suite finds the cluster and what e2e/cluster/e2e.sh started, once.
var suite = testenv.InstallationSuite[*env]{
	Name:                   "cluster e2e",
	KubeconfigEnv:          envKubeconfig,
	Hint:                   "this suite needs the single-node cluster of `make cluster-up` and runs with `make e2e-cluster` (e2e/cluster/README.md)",
	NamespaceEnv:           envNamespace,
	DefaultNamespace:       "e2e-cluster",
	ControllerNamespaceEnv: envControllerNamespace,
	TimeoutEnv:             envTimeout,
	Interval:               time.Second,
	Setup:                  setup,
}

// connect returns the cluster, skipping the test when none is given.
func connect(t *testing.T) *env { return suite.Connect(t) }

func setup(ctx context.Context, inst *testenv.Installation) (*env, error) {
	e := &env{client: inst.Client, ns: inst.Namespace, controllerNS: inst.ControllerNamespace, timeout: inst.Timeout}
	var err error
	if e.kube, err = kubernetes.NewForConfig(inst.Config); err != nil {
		return nil, err
	}
	c := e.client

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

	if e.platform, err = newPlatform(); err != nil {
		return nil, err
	}
	return e, nil
}

// poll calls check every second until it returns true, fails or the
// timeout passes (testenv.Poll).
func (e *env) poll(ctx context.Context, what string, check func() (bool, string, error)) error {
	return testenv.Poll(ctx, e.timeout, time.Second, what, check)
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

// autoSpec is the spec of an auto-approved object on GitRepository repo's
// path, checked hourly and retried every retry.
func autoSpec(repo, path string, retry time.Duration) infrav1.TerraformSpec {
	return infrav1.TerraformSpec{
		SourceRef:     infrav1.SourceReference{Kind: sourcev1.GitRepositoryKind, Name: repo},
		Path:          path,
		Interval:      metav1.Duration{Duration: time.Hour},
		RetryInterval: &metav1.Duration{Duration: retry},
		ApprovePlan:   infrav1.ApprovePlanAuto,
	}
}

// readyTrue accepts an object that is Ready.
func readyTrue(tf *infrav1.Terraform) bool {
	c := ready(tf)
	return c != nil && c.Status == metav1.ConditionTrue
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

// deleteAndWait deletes obj and waits until it is gone: a Terraform
// object has been destroyed.
func (e *env) deleteAndWait(t *testing.T, obj client.Object) {
	t.Helper()
	if err := testenv.DeleteAndWait(context.Background(), e.client, obj, e.timeout, time.Second); err != nil {
		t.Error(err)
	}
}

// waitGone waits until obj no longer exists.
func (e *env) waitGone(t *testing.T, obj client.Object) {
	t.Helper()
	if err := testenv.WaitGone(context.Background(), e.client, obj, e.timeout, time.Second); err != nil {
		t.Fatal(err)
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
	cur, err := testenv.WaitFor(context.Background(), e.client, tf, e.timeout, time.Second, what, check)
	if err != nil {
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
