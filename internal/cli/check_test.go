package cli

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// kubernetesVersion is the test API server's version in check's output,
// which the golden files do not pin.
var kubernetesVersion = regexp.MustCompile(`Kubernetes \d+\.\d+\.\d+`)

// TestCheck installs Landform step by step on an API server of its own,
// which starts without any CRD, and checks after each step.
func TestCheck(t *testing.T) {
	root := repoRoot()
	cfg, kc := bareAPIServer(t)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	check := func(t *testing.T, name string, args ...string) cli {
		t.Helper()
		r := run(t, "", append([]string{"--kubeconfig", kc}, args...)...)
		r.args = args
		golden(t, "check/"+name, kubernetesVersion.ReplaceAllString(r.transcript(), "Kubernetes VERSION"))
		return r
	}
	// checked runs check with -o format and returns the status of each
	// check by name, after testing the exit code.
	checked := func(t *testing.T, name string, code int, args ...string) map[string]string {
		t.Helper()
		r := check(t, name, args...)
		if got := ExitCode(r.err); got != code {
			t.Errorf("exit code %d, want %d (%v)", got, code, r.err)
		}
		var checks []checkResult
		if err := yaml.Unmarshal([]byte(r.stdout), &checks); err != nil {
			t.Fatalf("-o prints no list of checks: %v\n%s", err, r.stdout)
		}
		statuses := map[string]string{}
		for _, c := range checks {
			if _, dup := statuses[c.Name]; dup {
				t.Errorf("two checks named %s", c.Name)
			}
			if c.Message == "" {
				t.Errorf("check %s has no message", c.Name)
			}
			statuses[c.Name] = c.Status
		}
		return statuses
	}
	// want tests the statuses of some checks; "" is a check not made.
	want := func(t *testing.T, statuses map[string]string, want map[string]string) {
		t.Helper()
		for name, status := range want {
			if statuses[name] != status {
				t.Errorf("check %s: status %q, want %q (all: %v)", name, statuses[name], status, statuses)
			}
		}
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
	t.Run("no flux json", func(t *testing.T) {
		got := checked(t, "pre-no-flux-json", ExitError, "check", "--pre", "-o", "json")
		want(t, got, map[string]string{"kubernetes": checkOK, "source/GitRepository": checkWarn, "sources": checkFail, "api/Alert": checkWarn})
	})

	install(t, filepath.Join(root, "bin", "flux-crds"))
	t.Run("pre", func(t *testing.T) { check(t, "pre", "check", "--pre") })
	t.Run("pre json", func(t *testing.T) {
		got := checked(t, "pre-json", ExitOK, "check", "--pre", "-o", "json")
		want(t, got, map[string]string{"source/GitRepository": checkOK, "sources": "", "api/Kustomization": checkWarn, "crd/" + resTerraforms: ""})
	})
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
	t.Run("missing account yaml", func(t *testing.T) {
		got := checked(t, "missing-account-yaml", ExitError, "check", "-o", "yaml")
		want(t, got, map[string]string{
			"crd/" + resTerraforms:                           checkOK,
			"deployment/landform-system/landform-controller": checkOK,
			"image/landform-system/landform-controller":      checkInfo,
			"runner-serviceaccount/team-a/tf-runner":         checkOK,
			"runner-serviceaccount/team-b/tf-runner":         checkFail,
			"events-addr":                                    checkWarn,
			"alert-kind/v1beta3":                             checkWarn,
		})
	})

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
	t.Run("passed json", func(t *testing.T) {
		got := checked(t, "passed-json", ExitOK, "check", "-o", "json")
		for name, status := range got {
			if status == checkFail {
				t.Errorf("check %s failed", name)
			}
		}
		want(t, got, map[string]string{"runner-serviceaccount/team-b/tf-runner": checkOK, "events-addr": checkOK, "alert-kind/v1beta3": checkOK})
	})
	t.Run("bad output", func(t *testing.T) { check(t, "bad-output", "check", "-o", "table") })
	t.Run("args", func(t *testing.T) {
		if r := run(t, "", "--kubeconfig", kc, "check", "extra"); r.err == nil || !strings.Contains(r.err.Error(), "unknown command") && !strings.Contains(r.err.Error(), "accepts 0 arg") {
			t.Errorf("check extra: %v", r.err)
		}
	})
}
