package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/landform-dev/landform/internal/testenv"
)

// controllerDeployment creates a Deployment as the chart does.
func controllerDeployment(t *testing.T, ns, name string, labels map[string]string, image string) {
	t.Helper()
	sel := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{
					{Name: "sidecar", Image: "proxy:1.0"},
					{Name: "manager", Image: image},
				}},
			},
		},
	}
	if err := env.Client.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}

// TestVersion runs first against a cluster without a controller
// Deployment, then with two.
func TestVersion(t *testing.T) {
	ns := namespace(t, "version")
	objs := fixtureStates(t, ns, "version")
	storePlan(t, objs[objPending], pendingPlan, rev2, false)
	namespace(t, "version-empty")

	golden(t, "version/client", run(t, "", "version", "--client").transcript())
	golden(t, "version/no-controller", run(t, "", "version", "-n", ns).transcript())

	// The chart labels its Deployment with its appVersion; the image the
	// Pods run is what counts: values may override it, and a rollout may
	// be under way.
	sys := namespace(t, "landform-system")
	controllerDeployment(t, sys, "landform-controller", map[string]string{nameLabel: nameValue, componentLabel: controllerValue, "app.kubernetes.io/version": "0.3.0"}, "ghcr.io/landform-dev/landform-controller:v0.3.1")
	controllerPod(t, sys, "landform-controller-6d9f7-a", "landform-controller", corev1.PodRunning, "ghcr.io/landform-dev/landform-controller:v0.3.1")
	controllerPod(t, sys, "landform-controller-6d9f7-b", "landform-controller", corev1.PodRunning, "ghcr.io/landform-dev/landform-controller:v0.3.1")
	controllerPod(t, sys, "landform-controller-54c8b-a", "landform-controller", corev1.PodFailed, "ghcr.io/landform-dev/landform-controller:v0.2.9")
	other := namespace(t, "landform-canary")
	controllerDeployment(t, other, "landform-controller", map[string]string{nameLabel: nameValue, componentLabel: controllerValue}, "localhost:5000/landform-controller:v0.4.0-rc.1@sha256:0123")
	rolling := namespace(t, "landform-rolling")
	controllerDeployment(t, rolling, "landform-controller", map[string]string{nameLabel: nameValue, componentLabel: controllerValue}, "ghcr.io/landform-dev/landform-controller:v0.5.0")
	controllerPod(t, rolling, "landform-controller-1", "landform-controller", corev1.PodRunning, "ghcr.io/landform-dev/landform-controller:v0.4.0")
	controllerPod(t, rolling, "landform-controller-2", "landform-controller", corev1.PodRunning, "ghcr.io/landform-dev/landform-controller:v0.5.0")
	for _, tt := range []struct {
		golden string
		args   []string
	}{
		{"version/controllers", []string{"version", "-n", ns}},
		{"version/object", []string{"version", "-n", ns, objPending}},
		{"version/no-plan", []string{"version", "-n", "version-empty"}},
		{"version/json", []string{"version", "-n", ns, "-o", "json"}},
		{"version/forbidden", []string{"version", "-n", ns, "--as", "nobody"}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			golden(t, tt.golden, run(t, "", tt.args...).transcript())
		})
	}
}

// controllerPod creates a Pod of the Deployment name in phase, whose
// manager container runs image, as the kubelet reports it.
func controllerPod(t *testing.T, ns, name, deployment string, phase corev1.PodPhase, image string) {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": deployment}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "sidecar", Image: "proxy:1.0"},
			{Name: "manager", Image: image},
		}},
	}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = phase
	p.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "sidecar", Image: "docker.io/library/proxy:1.0", ImageID: "docker.io/library/proxy@sha256:0123"},
		{Name: "manager", Image: image, ImageID: image + "@sha256:4567"},
	}
	if err := env.Client.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
}

func TestImageTag(t *testing.T) {
	for image, want := range map[string]string{
		"ghcr.io/landform-dev/landform-controller:v0.3.0":         "v0.3.0",
		"localhost:5000/landform-controller":                      "unknown",
		"localhost:5000/landform-controller:v1@sha256:0123456789": "v1",
		"landform-controller@sha256:0123456789":                   "unknown",
	} {
		if got := imageTag(image); got != want {
			t.Errorf("imageTag(%q) = %q, want %q", image, got, want)
		}
	}
}

// TestNotInstalled runs commands against an API server without Landform's CRD.
func TestNotInstalled(t *testing.T) {
	_, kc := bareAPIServer(t)
	for _, args := range [][]string{
		{"get"},
		{"status", "database"},
		{"approve", "database"},
		{"version"},
	} {
		t.Run(args[0], func(t *testing.T) {
			r := run(t, "", append([]string{"--kubeconfig", kc}, args...)...)
			golden(t, "not-installed/"+args[0], strings.ReplaceAll(r.transcript(), kc, "KUBECONFIG"))
		})
	}
}

// TestConnectionErrors checks the one-line errors when the cluster cannot
// be used at all.
func TestConnectionErrors(t *testing.T) {
	dir := t.TempDir()
	unreachable := filepath.Join(dir, "unreachable")
	testenv.UnreachableKubeconfig(t, unreachable)
	for _, tt := range []struct {
		golden string
		args   []string
	}{
		{"errors/unreachable", []string{"--kubeconfig", unreachable, "get"}},
		{"errors/missing-kubeconfig", []string{"--kubeconfig", filepath.Join(dir, "missing"), "get"}},
		{"errors/unknown-context", []string{"--context", "nope", "get"}},
		// Not reaching the cluster is not Landform missing from it.
		{"errors/version-unreachable", []string{"--kubeconfig", unreachable, "version"}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			r := run(t, "", tt.args...)
			golden(t, tt.golden, strings.ReplaceAll(r.transcript(), dir, "DIR"))
		})
	}
}
