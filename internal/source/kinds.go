package source

import (
	"fmt"
	"strings"
	"sync"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// Versions are the versions of source.toolkit.fluxcd.io Landform reads, the
// preferred first. Flux v2.0 to v2.5 serve OCIRepository (and up to v2.2
// Bucket) only at v1beta2; the artifact fields are the same at both.
var Versions = []string{"v1", "v1beta2"}

// Kinds are the source kinds Landform reads from.
//
// ExternalArtifact (Flux v2.7 and later, served only at v1) is what an
// ArtifactGenerator publishes: one artifact per module path of a monorepo,
// whose revision changes only when that path's content does. A Terraform
// object on it is therefore woken and re-planned only by a commit that
// changes its own module, where a GitRepository wakes every object on the
// repository at every commit. It is read like the others: its status has
// the same artifact and conditions.
var Kinds = []string{sourcev1.GitRepositoryKind, sourcev1.OCIRepositoryKind, sourcev1.BucketKind, sourcev1.ExternalArtifactKind}

// servedSince names the first Flux release serving each kind at one of
// Versions, for the message of a kind the cluster does not serve.
var servedSince = map[string]string{
	sourcev1.GitRepositoryKind:    "Flux v2.0 (source-controller v1.0)",
	sourcev1.OCIRepositoryKind:    "Flux v2.0 (source-controller v1.0)",
	sourcev1.BucketKind:           "Flux v2.0 (source-controller v1.0)",
	sourcev1.ExternalArtifactKind: "Flux v2.7 (source-controller v1.7)",
}

// Served records which source kinds the API server serves, and at which
// version. The zero value knows nothing: every kind is looked up at v1 until
// the first Discover.
type Served struct {
	mu         sync.RWMutex
	discovered bool
	gvks       map[string]schema.GroupVersionKind
}

// Discover asks the API server which source kinds it serves and returns the
// kinds that became served (or changed version) since the last call.
func (s *Served) Discover(dc discovery.DiscoveryInterface) ([]schema.GroupVersionKind, error) {
	found := map[string]schema.GroupVersionKind{}
	for i := len(Versions) - 1; i >= 0; i-- {
		gv := schema.GroupVersion{Group: sourcev1.GroupVersion.Group, Version: Versions[i]}
		list, err := dc.ServerResourcesForGroupVersion(gv.String())
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("discovering %s: %w", gv, err)
		}
		for _, res := range list.APIResources {
			for _, kind := range Kinds {
				if res.Kind == kind && !strings.Contains(res.Name, "/") {
					found[kind] = gv.WithKind(kind) // the preferred version is looked at last
				}
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var added []schema.GroupVersionKind
	for kind, gvk := range found {
		if old, ok := s.gvks[kind]; !ok || old != gvk {
			added = append(added, gvk)
		}
	}
	s.gvks, s.discovered = found, true
	return added, nil
}

// Lookup returns the group, version and kind kind is read at. It fails with
// ErrKindNotServed when the API server serves kind at none of Versions.
func (s *Served) Lookup(kind string) (schema.GroupVersionKind, error) {
	if _, ok := servedSince[kind]; !ok {
		return schema.GroupVersionKind{}, fmt.Errorf("unsupported source kind %q: use %s", kind, strings.Join(Kinds, ", "))
	}
	if s == nil {
		return sourcev1.GroupVersion.WithKind(kind), nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.discovered {
		return sourcev1.GroupVersion.WithKind(kind), nil
	}
	gvk, ok := s.gvks[kind]
	if !ok {
		alternative := "or use a " + sourcev1.GitRepositoryKind
		if kind == sourcev1.GitRepositoryKind {
			alternative = "(Landform reads modules from Flux sources)"
		}
		versions := fmt.Sprintf("neither %s/%s nor %s", sourcev1.GroupVersion.Group, Versions[0], Versions[1])
		if kind == sourcev1.ExternalArtifactKind {
			versions = "not " + sourcev1.GroupVersion.String() // it never existed at v1beta2
		}
		return schema.GroupVersionKind{}, fmt.Errorf("%w: %s is not served by this cluster (%s): install %s or later %s",
			ErrKindNotServed, kind, versions, servedSince[kind], alternative)
	}
	return gvk, nil
}
