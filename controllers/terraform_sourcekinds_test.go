package controllers

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/mtls"
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/planstore"
	"github.com/landform-dev/landform/internal/source"
	"github.com/landform-dev/landform/runner"
)

// The Flux the user has: an API server of its own per test, with only some
// of Flux's source CRDs, and the controller set up as cmd/controller does.

// fluxCRD is one of the source CRDs of the pinned source-controller (v1).
func fluxCRD(kind string) string {
	return filepath.Join("..", "bin", "flux-crds", "source.toolkit.fluxcd.io_"+kind+".yaml")
}

// kindsEnv is an API server with the given source CRDs and a running
// controller.
type kindsEnv struct {
	env       *envtest.Environment
	c         client.Client
	r         *TerraformReconciler
	artifacts *artifactServer
}

func startKindsEnv(t *testing.T, crds ...string) *kindsEnv {
	t.Helper()
	g := NewWithT(t)
	tmp := t.TempDir()
	env := &envtest.Environment{
		CRDDirectoryPaths:     append([]string{filepath.Join("..", "config", "crd", "bases")}, crds...),
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = env.Stop() })
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, infrav1.AddToScheme, sourcev1.AddToScheme} {
		g.Expect(add(scheme)).To(Succeed())
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Client:  client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}},
		Metrics: metricsserver.Options{BindAddress: "0"},
		// The suite's manager runs a controller of the same name.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	g.Expect(err).NotTo(HaveOccurred())
	ca, err := mtls.NewCA("landform-kinds-test", time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfig := filepath.Join(tmp, "kubeconfig")
	g.Expect(placement.WriteKubeconfig(cfg, kubeconfig)).To(Succeed())
	kube, err := kubernetes.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	r := &TerraformReconciler{
		Client:        mgr.GetClient(),
		EventRecorder: mgr.GetEventRecorderFor("landform-controller"),
		Fetcher:       source.NewFetcher(filepath.Join(tmp, "cache")),
		Plans:         planstore.Store{Client: mgr.GetClient()},
		Placer: &placement.Local{
			CA: ca, Kubeconfig: kubeconfig, Grace: 10 * time.Second,
			Options: runner.LocalOptions{
				Binary: runnerBinPath, Engine: tofuPath, WorkDir: filepath.Join(tmp, "runners"),
				Stdout: runnerLogs, Stderr: runnerLogs,
			},
		},
	}
	g.Expect(withRuns(mgr, r, kube, 0)).To(Succeed())
	ctx, cancel := context.WithCancel(context.Background())
	g.Expect(r.SetupWithManager(ctx, mgr, Options{MaxConcurrentReconciles: 2, SourceDiscoveryInterval: 500 * time.Millisecond})).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		g.Expect(<-done).To(Succeed(), "the manager failed")
	})
	artifacts := newArtifactServer(filepath.Join(tmp, "artifacts"))
	t.Cleanup(artifacts.srv.Close)
	return &kindsEnv{env: env, c: c, r: r, artifacts: artifacts}
}

// outputModule is a module without providers: it runs offline.
var outputModule = map[string]string{"mod/main.tf": `output "greeting" { value = "hello" }` + "\n"}

func (e *kindsEnv) terraform(t *testing.T, ns, name, kind string) *infrav1.Terraform {
	t.Helper()
	return e.terraformOn(t, ns, name, kind, "repo")
}

// terraformOn creates a Terraform object on the source kind/source.
func (e *kindsEnv) terraformOn(t *testing.T, ns, name, kind, source string) *infrav1.Terraform {
	t.Helper()
	tf := &infrav1.Terraform{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: infrav1.TerraformSpec{
			SourceRef: infrav1.SourceReference{Kind: kind, Name: source},
			Path:      "mod",
			Interval:  metav1.Duration{Duration: time.Hour},
			// Only a watch can bring the object back within the test.
			RetryInterval: &metav1.Duration{Duration: time.Hour},
			ApprovePlan:   infrav1.ApprovePlanAuto,
		},
	}
	NewWithT(t).Expect(e.c.Create(context.Background(), tf)).To(Succeed())
	return tf
}

func (e *kindsEnv) namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kinds-"}}
	NewWithT(t).Expect(e.c.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

func (e *kindsEnv) waitFor(t *testing.T, tf *infrav1.Terraform, check func(g Gomega, obj *infrav1.Terraform)) {
	t.Helper()
	var last *infrav1.Terraform
	NewWithT(t).Eventually(func(g Gomega) {
		last = &infrav1.Terraform{}
		g.Expect(e.c.Get(context.Background(), client.ObjectKeyFromObject(tf), last)).To(Succeed())
		check(g, last)
	}).WithTimeout(waitTimeout).WithPolling(pollEvery).Should(Succeed(), func() string { return describe(last) })
}

func (e *kindsEnv) waitReady(t *testing.T, tf *infrav1.Terraform) {
	t.Helper()
	e.waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(conditions.IsReady(obj)).To(BeTrue(), "Ready")
		g.Expect(obj.Status.LastAppliedRevision).NotTo(BeEmpty())
		g.Expect(obj.Status.AvailableOutputs).To(ContainElement("greeting"))
	})
}

func (e *kindsEnv) waitStalledNotServed(t *testing.T, tf *infrav1.Terraform, kind string) {
	t.Helper()
	e.waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		stalled := conditions.Get(obj, meta.StalledCondition)
		g.Expect(stalled).NotTo(BeNil(), "Stalled")
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(stalled.Reason).To(Equal(infrav1.SourceKindNotServedReason))
		g.Expect(stalled.Message).To(ContainSubstring(kind + " is not served by this cluster"))
		g.Expect(stalled.Message).To(ContainSubstring("install Flux v2.0 (source-controller v1.0) or later"))
		g.Expect(conditions.IsFalse(obj, meta.ReadyCondition)).To(BeTrue())
		g.Expect(readyReasonOf(obj)).To(Equal(infrav1.SourceKindNotServedReason))
	})
}

// publish writes a source's status as source-controller would, at
// whatever version obj is.
func (e *kindsEnv) publish(t *testing.T, obj *unstructured.Unstructured, artifact *meta.Artifact) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(e.c.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	status := map[string]any{"conditions": []any{map[string]any{
		"type": meta.ReadyCondition, "status": "False", "reason": "Progressing",
		"message": "pulling the artifact", "lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339),
	}}}
	if artifact != nil {
		a, err := runtime.DefaultUnstructuredConverter.ToUnstructured(artifact)
		g.Expect(err).NotTo(HaveOccurred())
		status["artifact"] = a
		status["conditions"] = []any{map[string]any{
			"type": meta.ReadyCondition, "status": "True", "reason": meta.SucceededReason,
			"message": "stored artifact", "lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339),
		}}
	}
	g.Expect(unstructured.SetNestedField(obj.Object, status, "status")).To(Succeed())
	g.Expect(e.c.Status().Update(ctx, obj)).To(Succeed())
}

// newSource creates a source of kind at apiVersion, as unstructured.
func (e *kindsEnv) newSource(t *testing.T, apiVersion, kind, ns string) *unstructured.Unstructured {
	t.Helper()
	url := "oci://example.invalid/modules"
	if kind == sourcev1.GitRepositoryKind {
		url = "https://example.invalid/modules.git"
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"namespace": ns, "name": "repo"},
		"spec":     map[string]any{"url": url, "interval": "1h"},
	}}
	NewWithT(t).Expect(e.c.Create(context.Background(), obj)).To(Succeed())
	return obj
}

// With only GitRepository installed (no OCIRepository or Bucket at any
// version), the controller still runs: GitRepository objects become
// Ready, the others are Stalled naming what to install, and an
// OCIRepository CRD installed later is picked up without a restart.
func TestSourceKindsOnlyGitRepository(t *testing.T) {
	e := startKindsEnv(t, fluxCRD("gitrepositories"))
	ns := e.namespace(t)

	git := e.newSource(t, sourcev1.GroupVersion.String(), sourcev1.GitRepositoryKind, ns)
	e.publish(t, git, e.artifacts.publish(outputModule))
	viaGit := e.terraform(t, ns, "via-git", sourcev1.GitRepositoryKind)
	viaOCI := e.terraform(t, ns, "via-oci", sourcev1.OCIRepositoryKind)
	viaBucket := e.terraform(t, ns, "via-bucket", sourcev1.BucketKind)
	e.waitReady(t, viaGit)
	e.waitStalledNotServed(t, viaOCI, sourcev1.OCIRepositoryKind)
	e.waitStalledNotServed(t, viaBucket, sourcev1.BucketKind)

	// Flux upgraded: the OCIRepository CRD appears, then the source.
	_, err := envtest.InstallCRDs(e.env.Config, envtest.CRDInstallOptions{Paths: []string{fluxCRD("ocirepositories")}, ErrorIfPathMissing: true})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	// The object is woken as soon as the kind is served: the source does
	// not exist yet.
	e.waitFor(t, viaOCI, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(readyReasonOf(obj)).To(Equal(infrav1.SourceNotFoundReason))
		g.Expect(conditions.Has(obj, meta.StalledCondition)).To(BeFalse(), "Stalled")
	})
	oci := e.newSource(t, sourcev1.GroupVersion.String(), sourcev1.OCIRepositoryKind, ns)
	e.publish(t, oci, e.artifacts.publish(outputModule))
	e.waitReady(t, viaOCI)
	e.waitStalledNotServed(t, viaBucket, sourcev1.BucketKind)
}

// OCIRepository served only at v1beta2 (Flux v2.0 to v2.5): its artifact
// is read, and a new artifact wakes the object through the watch.
func TestSourceKindsOCIRepositoryV1beta2(t *testing.T) {
	e := startKindsEnv(t, fluxCRD("gitrepositories"), filepath.Join("testdata", "flux-v2.0", "source.toolkit.fluxcd.io_ocirepositories.yaml"))
	ns := e.namespace(t)

	oci := e.newSource(t, "source.toolkit.fluxcd.io/v1beta2", sourcev1.OCIRepositoryKind, ns)
	e.publish(t, oci, nil)
	tf := e.terraform(t, ns, "via-oci", sourcev1.OCIRepositoryKind)
	// The source's own Ready message shows it was read.
	e.waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(readyReasonOf(obj)).To(Equal(infrav1.SourceNotReadyReason))
		g.Expect(readyMessageOf(obj)).To(ContainSubstring("pulling the artifact"))
	})
	e.publish(t, oci, e.artifacts.publish(outputModule))
	e.waitReady(t, tf)

	// Flux uninstalled: the CRD goes, the object is deleted after it and
	// destroys from the artifact it kept.
	g := NewWithT(t)
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "ocirepositories.source.toolkit.fluxcd.io"}}
	g.Expect(e.c.Delete(ctx, crd)).To(Succeed())
	g.Eventually(func() error {
		_, err := e.r.sourceKinds.Lookup(sourcev1.OCIRepositoryKind)
		return err
	}).WithTimeout(time.Minute).Should(MatchError(source.ErrKindNotServed))
	g.Expect(e.c.Delete(ctx, tf)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(e.c.Get(ctx, client.ObjectKeyFromObject(tf), &infrav1.Terraform{}))
	}).WithTimeout(waitTimeout).WithPolling(pollEvery).Should(BeTrue(), "the deletion did not finish")
}
