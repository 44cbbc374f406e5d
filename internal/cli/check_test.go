package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// kubernetesVersion is the test API server's version in check's output,
// which the golden files do not pin.
var kubernetesVersion = regexp.MustCompile(`Kubernetes \d+\.\d+\.\d+`)

// TestCheck installs Landform step by step on an API server of its own,
// which starts without any CRD, and checks after each step.
func TestCheck(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join(root, "bin")
	}
	cluster := &envtest.Environment{BinaryAssetsDirectory: dir}
	cfg, err := cluster.Start()
	if err != nil {
		t.Fatalf("starting an API server from %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = cluster.Stop() })
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := writeKubeconfig(cfg, kc); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	check := func(t *testing.T, name string, args ...string) {
		t.Helper()
		r := run(t, "", append([]string{"--kubeconfig", kc}, args...)...)
		r.args = args
		golden(t, "check/"+name, kubernetesVersion.ReplaceAllString(r.transcript(), "Kubernetes VERSION"))
	}
	install := func(t *testing.T, dirs ...string) {
		t.Helper()
		if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: dirs, ErrorIfPathMissing: true}); err != nil {
			t.Fatal(err)
		}
	}
	create := func(t *testing.T, objs ...client.Object) {
		t.Helper()
		for _, o := range objs {
			if err := c.Create(ctx, o); err != nil {
				t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
			}
		}
	}

	t.Run("no flux", func(t *testing.T) { check(t, "pre-no-flux", "check", "--pre") })

	install(t, filepath.Join(root, "bin", "flux-crds"))
	t.Run("pre", func(t *testing.T) { check(t, "pre", "check", "--pre") })
	t.Run("not installed", func(t *testing.T) { check(t, "not-installed", "check") })

	install(t, filepath.Join(root, "config", "crd", "bases"), filepath.Join(root, "bin", "flux-notification-crds"))
	ns := func(name string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	sa := func(ns, name string) *corev1.ServiceAccount {
		return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	tf := func(ns, name, account string) *v1alpha1.Terraform {
		return &v1alpha1.Terraform{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.TerraformSpec{
				SourceRef:          v1alpha1.SourceReference{Kind: "GitRepository", Name: "infra"},
				Path:               "./modules/" + name,
				ServiceAccountName: account,
			},
		}
	}
	sel := map[string]string{"app": "landform-controller"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "landform-system", Name: "landform-controller",
			Labels: map[string]string{nameLabel: nameValue, componentLabel: controllerValue}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "manager", Image: "ghcr.io/landform-dev/landform-controller:v0.5.0",
					Args: []string{"--leader-elect", "--default-service-account", "tf-runner"},
				}}},
			},
		},
	}
	create(t, ns("landform-system"), deploy, ns("team-a"), ns("team-b"),
		sa("team-a", "tf-runner"), sa("team-b", "network-runner"),
		tf("team-a", "db", ""), tf("team-a", "cache", ""), tf("team-b", "dns", ""), tf("team-b", "network", "network-runner"))
	t.Run("unavailable", func(t *testing.T) { check(t, "unavailable", "check") })

	deploy.Status = appsv1.DeploymentStatus{
		ObservedGeneration: deploy.Generation, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"}},
	}
	if err := c.Status().Update(ctx, deploy); err != nil {
		t.Fatal(err)
	}
	t.Run("missing account", func(t *testing.T) { check(t, "missing-account", "check") })

	// What docs/notifications.md has users do: events to
	// notification-controller, and the Alert CRD patched to take Terraform.
	create(t, sa("team-b", "tf-runner"))
	deploy.Spec.Template.Spec.Containers[0].Args = append(deploy.Spec.Template.Spec.Containers[0].Args,
		"--events-addr=http://notification-controller.flux-system.svc.cluster.local./")
	if err := c.Update(ctx, deploy); err != nil {
		t.Fatal(err)
	}
	deploy.Status.ObservedGeneration = deploy.Generation
	if err := c.Status().Update(ctx, deploy); err != nil {
		t.Fatal(err)
	}
	var alerts apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: alertCRD}, &alerts); err != nil {
		t.Fatal(err)
	}
	for i := range alerts.Spec.Versions {
		kind := alerts.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"].Properties["eventSources"].Items.Schema.Properties["kind"]
		kind.Enum = append(kind.Enum, apiextensionsv1.JSON{Raw: []byte(`"Terraform"`)})
		alerts.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"].Properties["eventSources"].Items.Schema.Properties["kind"] = kind
	}
	if err := c.Update(ctx, &alerts); err != nil {
		t.Fatal(err)
	}
	t.Run("passed", func(t *testing.T) { check(t, "passed", "check") })
	t.Run("args", func(t *testing.T) {
		if r := run(t, "", "--kubeconfig", kc, "check", "extra"); r.err == nil || !strings.Contains(r.err.Error(), "unknown command") && !strings.Contains(r.err.Error(), "accepts 0 arg") {
			t.Errorf("check extra: %v", r.err)
		}
	})
}
