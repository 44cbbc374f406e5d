package source

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Artifact is what a Flux source published: where to download it and the
// digest the download must match.
type Artifact struct {
	// Kind, Namespace and Name identify the source.
	Kind, Namespace, Name string
	// Revision is the source revision, e.g. "main@sha1:<commit>".
	Revision string
	// Digest is "<algorithm>:<hex>", e.g. "sha256:...".
	Digest string
	// URL serves the gzip'd tarball.
	URL string
}

// String names the source for messages.
func (a Artifact) String() string {
	return fmt.Sprintf("%s %s/%s", a.Kind, a.Namespace, a.Name)
}

// source is what all three Flux source kinds offer.
type source interface {
	client.Object
	GetArtifact() *meta.Artifact
	GetConditions() []metav1.Condition
}

// newSource returns an empty object of kind. All three kinds are served as
// source.toolkit.fluxcd.io/v1 by source-controller v1.9.
func newSource(kind string) (source, error) {
	switch kind {
	case sourcev1.GitRepositoryKind:
		return &sourcev1.GitRepository{}, nil
	case sourcev1.OCIRepositoryKind:
		return &sourcev1.OCIRepository{}, nil
	case sourcev1.BucketKind:
		return &sourcev1.Bucket{}, nil
	default:
		return nil, fmt.Errorf("unsupported source kind %q: use %s, %s or %s",
			kind, sourcev1.GitRepositoryKind, sourcev1.OCIRepositoryKind, sourcev1.BucketKind)
	}
}

// GetArtifact reads the source object and returns the artifact it last
// published. It fails with ErrSourceNotFound when the object does not exist
// and ErrSourceNotReady when it has no artifact yet.
func GetArtifact(ctx context.Context, c client.Reader, kind, namespace, name string) (*Artifact, error) {
	obj, err := newSource(kind)
	if err != nil {
		return nil, err
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: %s %s/%s does not exist; create it or fix spec.sourceRef",
				ErrSourceNotFound, kind, namespace, name)
		}
		return nil, fmt.Errorf("reading %s %s/%s: %w", kind, namespace, name, err)
	}
	art := obj.GetArtifact()
	if art == nil || art.URL == "" || art.Digest == "" {
		why := "it has no artifact yet"
		if ready := apimeta.FindStatusCondition(obj.GetConditions(), meta.ReadyCondition); ready != nil && ready.Message != "" {
			why += ": " + ready.Message
		}
		return nil, fmt.Errorf("%w: %s %s/%s: %s", ErrSourceNotReady, kind, namespace, name, why)
	}
	return &Artifact{
		Kind:      kind,
		Namespace: namespace,
		Name:      name,
		Revision:  art.Revision,
		Digest:    art.Digest,
		URL:       art.URL,
	}, nil
}
