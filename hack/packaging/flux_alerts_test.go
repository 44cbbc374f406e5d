package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// alertCRDLayouts are notification-controller's Alert CRDs, one per layout
// of versions, with the config/flux-alerts component meant for each.
var alertCRDLayouts = []struct{ crd, component string }{
	// Flux v2.0.0, v2.1.0 (notification-controller from flux2's
	// manifests/bases at those tags).
	{"hack/packaging/testdata/flux-alert-crds/notification-controller-v1.0.0.yaml", "v1beta1-v1beta2"},
	{"hack/packaging/testdata/flux-alert-crds/notification-controller-v1.1.0.yaml", "v1beta1-v1beta2"},
	// Flux v2.2.0, v2.6.0.
	{"hack/packaging/testdata/flux-alert-crds/notification-controller-v1.2.2.yaml", "v1beta1-v1beta3"},
	{"hack/packaging/testdata/flux-alert-crds/notification-controller-v1.6.0.yaml", "v1beta1-v1beta3"},
	// Flux v2.7.0, v2.8.0.
	{"hack/packaging/testdata/flux-alert-crds/notification-controller-v1.7.1.yaml", "v1beta2-v1beta3"},
	{"hack/packaging/testdata/flux-alert-crds/notification-controller-v1.8.0.yaml", "v1beta2-v1beta3"},
	// Flux v2.9: the notification-controller the e2e suites run.
	{"bin/flux-notification-crds/notification.toolkit.fluxcd.io_alerts.yaml", "v1beta3"},
}

// alertCRDWith builds, with kustomize, the Alert CRD file crd with the
// config/flux-alerts component, as a flux-system kustomization would.
func alertCRDWith(t *testing.T, crd, component string) (*unstructured.Unstructured, string, error) {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile(path(strings.Split(crd, "/")...))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, path("config", "flux-alerts", component))
	if err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - alerts.yaml\ncomponents:\n  - " + filepath.ToSlash(rel) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kustomizeBin(t), "build", dir).CombinedOutput()
	if err != nil {
		return nil, string(out), err
	}
	objs := decode(t, string(out))
	if len(objs) != 1 {
		t.Fatalf("kustomize built %d objects, want the Alert CRD", len(objs))
	}
	return objs[0], string(out), nil
}

// Each Flux release's Alert CRD, patched with its component, accepts kind
// Terraform in every version it serves and keeps Flux's own kinds; every
// other component fails the build rather than patching the wrong version.
func TestFluxAlertComponents(t *testing.T) {
	for _, l := range alertCRDLayouts {
		t.Run(filepath.Base(l.crd), func(t *testing.T) {
			crd, out, err := alertCRDWith(t, l.crd, l.component)
			if err != nil {
				t.Fatalf("%s with %s: %v\n%s", l.crd, l.component, err, out)
			}
			versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
			if len(versions) == 0 {
				t.Fatal("no versions")
			}
			for _, v := range versions {
				v := v.(map[string]any)
				enum, _, err := unstructured.NestedSlice(v, "schema", "openAPIV3Schema", "properties", "spec", "properties", "eventSources", "items", "properties", "kind", "enum")
				if err != nil {
					t.Fatal(err)
				}
				for _, kind := range []string{"Terraform", "Kustomization", "GitRepository"} {
					if !slices.Contains(enum, any(kind)) {
						t.Errorf("version %v: the eventSources kinds %v lack %s", v["name"], enum, kind)
					}
				}
			}
			for _, other := range alertCRDLayouts {
				if other.component == l.component {
					continue
				}
				if _, _, err := alertCRDWith(t, l.crd, other.component); err == nil {
					t.Errorf("component %s built on the CRD of %s's layout", other.component, l.component)
				}
			}
		})
	}
}
