package source

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// source is what all the Flux source kinds offer.
type source interface {
	client.Object
	GetArtifact() *meta.Artifact
	GetConditions() []metav1.Condition
}

// V1Object returns an empty typed object of gvk when gvk is one of the
// source kinds at v1, else nil.
func V1Object(gvk schema.GroupVersionKind) client.Object {
	if gvk.GroupVersion() != sourcev1.GroupVersion {
		return nil
	}
	switch gvk.Kind {
	case sourcev1.GitRepositoryKind:
		return &sourcev1.GitRepository{}
	case sourcev1.OCIRepositoryKind:
		return &sourcev1.OCIRepository{}
	case sourcev1.BucketKind:
		return &sourcev1.Bucket{}
	case sourcev1.ExternalArtifactKind:
		return &sourcev1.ExternalArtifact{}
	}
	return nil
}

// newSource returns an empty object of gvk: the v1 types, or an
// unstructured object for an older version (read from the API server, not
// the cache), whose status is read as v1's: the artifact and conditions
// have the same shape at v1beta2.
func newSource(gvk schema.GroupVersionKind) client.Object {
	if obj := V1Object(gvk); obj != nil {
		return obj
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// sourceStatus is what Landform reads of a source's status at any version.
type sourceStatus struct {
	Artifact   *meta.Artifact     `json:"artifact,omitempty"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

func statusOf(obj client.Object) (sourceStatus, error) {
	switch o := obj.(type) {
	case source:
		return sourceStatus{Artifact: o.GetArtifact(), Conditions: o.GetConditions()}, nil
	case *unstructured.Unstructured:
		var st sourceStatus
		raw, _, err := unstructured.NestedMap(o.Object, "status")
		if err != nil {
			return st, err
		}
		return st, runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &st)
	}
	return sourceStatus{}, fmt.Errorf("unexpected source type %T", obj)
}

// GetArtifact reads the source object, at the version served says the API
// server serves (v1 when served is nil), and returns the artifact it last
// published. It fails with ErrKindNotServed when the API server does not
// serve kind, ErrSourceNotFound when the object does not exist and
// ErrSourceNotReady when it has no artifact yet.
func GetArtifact(ctx context.Context, c client.Reader, served *Served, kind, namespace, name string) (*Artifact, error) {
	gvk, err := served.Lookup(kind)
	if err != nil {
		return nil, err
	}
	obj := newSource(gvk)
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: %s %s/%s does not exist; create it or fix spec.sourceRef",
				ErrSourceNotFound, kind, namespace, name)
		}
		return nil, fmt.Errorf("reading %s %s/%s: %w", kind, namespace, name, err)
	}
	st, err := statusOf(obj)
	if err != nil {
		return nil, fmt.Errorf("reading the status of %s %s/%s (%s): %w", kind, namespace, name, gvk.GroupVersion(), err)
	}
	art := st.Artifact
	if art == nil || art.URL == "" || art.Digest == "" {
		why := "it has no artifact yet"
		if ready := apimeta.FindStatusCondition(st.Conditions, meta.ReadyCondition); ready != nil && ready.Message != "" {
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
