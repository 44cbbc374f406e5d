package source

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func resources(gv string, kinds ...string) *metav1.APIResourceList {
	l := &metav1.APIResourceList{GroupVersion: gv}
	for _, k := range kinds {
		plural := strings.ToLower(k) + "s"
		l.APIResources = append(l.APIResources,
			metav1.APIResource{Name: plural, Kind: k, Namespaced: true},
			metav1.APIResource{Name: plural + "/status", Kind: k, Namespaced: true})
	}
	return l
}

// wantArtifact checks the artifact GetArtifact reads, through s, for the
// source of kind named name in flux-system.
func wantArtifact(t *testing.T, c client.Reader, s *Served, kind, name string, want *Artifact) {
	t.Helper()
	got, err := GetArtifact(context.Background(), c, s, kind, "flux-system", name)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("artifact (-want +got):\n%s", d)
	}
}

// Discovery picks v1 over v1beta2, reports only what changed, and a kind
// served at neither is refused with what to install.
func TestServedDiscover(t *testing.T) {
	dc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	var s Served
	// Before any discovery, everything is read at v1.
	if gvk, err := s.Lookup("Bucket"); err != nil || gvk.Version != "v1" {
		t.Fatalf("undiscovered Bucket: %v %v", gvk, err)
	}

	// Flux v2.0: GitRepository v1, OCIRepository and Bucket v1beta2.
	dc.Resources = []*metav1.APIResourceList{
		resources("source.toolkit.fluxcd.io/v1", "GitRepository"),
		resources("source.toolkit.fluxcd.io/v1beta2", "GitRepository", "OCIRepository", "Bucket", "HelmChart"),
	}
	added, err := s.Discover(dc)
	if err != nil {
		t.Fatal(err)
	}
	if len(added) != 3 {
		t.Errorf("added %v, want GitRepository, OCIRepository and Bucket", added)
	}
	for kind, version := range map[string]string{"GitRepository": "v1", "OCIRepository": "v1beta2", "Bucket": "v1beta2"} {
		if gvk, err := s.Lookup(kind); err != nil || gvk != (schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: version, Kind: kind}) {
			t.Errorf("%s: %v %v, want %s", kind, gvk, err, version)
		}
	}

	// Flux v2.6 and later: OCIRepository reaches v1; Bucket is gone.
	dc.Resources = []*metav1.APIResourceList{resources("source.toolkit.fluxcd.io/v1", "GitRepository", "OCIRepository")}
	added, err = s.Discover(dc)
	if err != nil {
		t.Fatal(err)
	}
	want := []schema.GroupVersionKind{{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "OCIRepository"}}
	if d := cmp.Diff(want, added); d != "" {
		t.Errorf("added (-want +got):\n%s", d)
	}
	_, err = s.Lookup("Bucket")
	if !errors.Is(err, ErrKindNotServed) {
		t.Fatalf("Bucket: %v, want ErrKindNotServed", err)
	}
	for _, want := range []string{"Bucket is not served by this cluster", "install Flux v2.0 (source-controller v1.0) or later", "GitRepository"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if _, err := s.Lookup("HelmChart"); err == nil || !strings.Contains(err.Error(), `unsupported source kind "HelmChart"`) {
		t.Errorf("HelmChart: %v", err)
	}
}

// A source served only at v1beta2 is read as unstructured; its status has
// v1's shape.
func TestGetArtifactV1beta2(t *testing.T) {
	dc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	dc.Resources = []*metav1.APIResourceList{resources("source.toolkit.fluxcd.io/v1beta2", "OCIRepository")}
	var s Served
	if _, err := s.Discover(dc); err != nil {
		t.Fatal(err)
	}
	newObj := func(name string, status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "source.toolkit.fluxcd.io/v1beta2", "kind": "OCIRepository",
			"metadata": map[string]any{"namespace": "flux-system", "name": name},
		}}
		if status != nil {
			u.Object["status"] = status
		}
		return u
	}
	c := fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithObjects(
		newObj("ready", map[string]any{"artifact": map[string]any{
			"path": "x.tar.gz", "url": "http://sc/x.tar.gz", "revision": "v1@sha256:abc", "digest": "sha256:0123",
			"lastUpdateTime": "2024-01-01T00:00:00Z",
		}}),
		newObj("pending", map[string]any{"conditions": []any{map[string]any{
			"type": meta.ReadyCondition, "status": "False", "reason": "OCIPullFailed",
			"message": "unauthorized", "lastTransitionTime": "2024-01-01T00:00:00Z",
		}}}),
	).Build()

	wantArtifact(t, c, &s, "OCIRepository", "ready",
		&Artifact{Kind: "OCIRepository", Namespace: "flux-system", Name: "ready", Revision: "v1@sha256:abc", Digest: "sha256:0123", URL: "http://sc/x.tar.gz"})
	_, err := GetArtifact(context.Background(), c, &s, "OCIRepository", "flux-system", "pending")
	if !errors.Is(err, ErrSourceNotReady) || !strings.Contains(err.Error(), "unauthorized") {
		t.Errorf("pending: %v, want ErrSourceNotReady with the source's message", err)
	}
	_, err = GetArtifact(context.Background(), c, &s, "OCIRepository", "flux-system", "absent")
	if !errors.Is(err, ErrSourceNotFound) {
		t.Errorf("absent: %v, want ErrSourceNotFound", err)
	}
	_, err = GetArtifact(context.Background(), c, &s, "GitRepository", "flux-system", "ready")
	if !errors.Is(err, ErrKindNotServed) {
		t.Errorf("GitRepository: %v, want ErrKindNotServed", err)
	}
}

// ExternalArtifact is served from Flux v2.7, only at v1: before, objects
// on it are refused with the release to install; once served, its
// artifact is read like any other source's.
func TestServedExternalArtifact(t *testing.T) {
	dc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	var s Served
	// Flux v2.6: no ExternalArtifact.
	dc.Resources = []*metav1.APIResourceList{resources("source.toolkit.fluxcd.io/v1", "GitRepository", "OCIRepository", "Bucket")}
	if _, err := s.Discover(dc); err != nil {
		t.Fatal(err)
	}
	_, err := s.Lookup("ExternalArtifact")
	if !errors.Is(err, ErrKindNotServed) {
		t.Fatalf("ExternalArtifact on Flux v2.6: %v, want ErrKindNotServed", err)
	}
	for _, want := range []string{"ExternalArtifact is not served by this cluster (not source.toolkit.fluxcd.io/v1)", "install Flux v2.7 (source-controller v1.7) or later"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}

	// Flux v2.7.
	dc.Resources = []*metav1.APIResourceList{resources("source.toolkit.fluxcd.io/v1", "GitRepository", "OCIRepository", "Bucket", "ExternalArtifact")}
	added, err := s.Discover(dc)
	if err != nil {
		t.Fatal(err)
	}
	want := []schema.GroupVersionKind{{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "ExternalArtifact"}}
	if d := cmp.Diff(want, added); d != "" {
		t.Errorf("added (-want +got):\n%s", d)
	}
	scheme := runtime.NewScheme()
	if err := sourcev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ea := &sourcev1.ExternalArtifact{
		ObjectMeta: metav1.ObjectMeta{Namespace: "flux-system", Name: "network"},
		Status: sourcev1.ExternalArtifactStatus{Artifact: &meta.Artifact{
			Path: "x.tar.gz", URL: "http://sc/x.tar.gz", Revision: "latest@sha256:abc", Digest: "sha256:abc",
		}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ea).Build()
	wantArtifact(t, c, &s, "ExternalArtifact", "network",
		&Artifact{Kind: "ExternalArtifact", Namespace: "flux-system", Name: "network", Revision: "latest@sha256:abc", Digest: "sha256:abc", URL: "http://sc/x.tar.gz"})
}
