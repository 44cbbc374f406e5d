package cluster

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
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
	ns           string
	controllerNS string
	node         *corev1.Node
	nodeIP       string
	timeout      time.Duration
	artifacts    *artifactServer
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

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
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
	timeout, err := time.ParseDuration(envOr(envTimeout, "5m"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envTimeout, err)
	}
	e := &env{
		client:       c,
		ns:           envOr(envNamespace, "e2e-cluster"),
		controllerNS: envOr(envControllerNamespace, "landform-system"),
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

	// Artifacts are served on the node's own address, which the
	// controller's Pod reaches through the bridge: nothing leaves the
	// machine.
	if e.artifacts, err = newArtifactServer(e.nodeIP); err != nil {
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

// gitRepository creates a GitRepository whose status carries an artifact of
// files, as source-controller would report it (the suite runs no
// source-controller: the CRD is installed and the suite is its server).
func (e *env) gitRepository(t *testing.T, name string, files map[string]string) *sourcev1.GitRepository {
	t.Helper()
	ctx := context.Background()
	repo := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: sourcev1.GitRepositorySpec{
			// Never fetched: no source-controller runs.
			URL:      "http://" + e.nodeIP + "/" + name + ".git",
			Interval: metav1.Duration{Duration: time.Hour},
		},
	}
	_ = e.client.Delete(ctx, repo)
	if err := e.poll(ctx, "an old GitRepository "+name+" to go", func() (bool, string, error) {
		err := e.client.Get(ctx, client.ObjectKeyFromObject(repo), &sourcev1.GitRepository{})
		return apierrors.IsNotFound(err), "still there", client.IgnoreNotFound(err)
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.client.Create(ctx, repo); err != nil {
		t.Fatalf("creating GitRepository %s: %v", name, err)
	}
	t.Cleanup(func() { _ = e.client.Delete(context.Background(), repo) })
	art := e.artifacts.publish(files)
	repo.Status.Artifact = art
	repo.Status.ObservedGeneration = repo.Generation
	conditions.MarkTrue(repo, meta.ReadyCondition, meta.SucceededReason, "stored artifact for revision %s", art.Revision)
	if err := e.client.Status().Update(ctx, repo); err != nil {
		t.Fatalf("publishing the artifact of %s: %v", name, err)
	}
	return repo
}

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

// deleteLeftovers deletes a state Secret, its lock Lease and other Secrets
// that an earlier, interrupted run left behind.
func (e *env) deleteLeftovers(t *testing.T, state string, secrets ...string) {
	t.Helper()
	ctx := context.Background()
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

// ready returns the Ready condition, if the object's status is current.
func ready(tf *infrav1.Terraform) *metav1.Condition {
	if tf.Status.ObservedGeneration != tf.Generation {
		return nil
	}
	return apimeta.FindStatusCondition(tf.Status.Conditions, meta.ReadyCondition)
}

func describe(tf *infrav1.Terraform) string {
	var parts []string
	for _, c := range tf.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("generation %d observed %d; %s", tf.Generation, tf.Status.ObservedGeneration, strings.Join(parts, "; "))
}

// artifactServer serves tarballs the way source-controller does, on the
// node's address.
type artifactServer struct {
	base  string
	mu    sync.Mutex
	files map[string][]byte
}

func newArtifactServer(ip string) (*artifactServer, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return nil, fmt.Errorf("serving artifacts on the node's address %s: %w", ip, err)
	}
	s := &artifactServer{base: "http://" + l.Addr().String(), files: map[string][]byte{}}
	go func() {
		_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			data, ok := s.files[strings.TrimPrefix(r.URL.Path, "/")]
			s.mu.Unlock()
			if !ok {
				http.NotFound(w, r)
				return
			}
			_, _ = w.Write(data)
		}))
	}()
	return s, nil
}

// publish packs files into a tarball and returns its artifact.
func (s *artifactServer) publish(files map[string]string) *meta.Artifact {
	data := tarball(files)
	sum := sha256.Sum256(data)
	rev := sha1.Sum(data)
	name := hex.EncodeToString(sum[:8]) + ".tar.gz"
	s.mu.Lock()
	s.files[name] = data
	s.mu.Unlock()
	size := int64(len(data))
	return &meta.Artifact{
		Path:           name,
		URL:            s.base + "/" + name,
		Revision:       "main@sha1:" + hex.EncodeToString(rev[:]),
		Digest:         "sha256:" + hex.EncodeToString(sum[:]),
		LastUpdateTime: metav1.Now(),
		Size:           &size,
	}
}

func tarball(files map[string]string) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		_ = tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)})
		_, _ = tw.Write([]byte(files[n]))
	}
	_ = tw.Close()
	_ = gz.Close()
	return buf.Bytes()
}
