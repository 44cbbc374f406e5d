// Package keptartifact keeps the source artifact a Terraform object last
// applied, in Secrets owned by the object, so that the object can still be
// destroyed after its Flux source is gone (a GitRepository pruned together
// with the Terraform object, say).
//
// Secrets, because they are the one store that outlives both the source and
// the controller's Pod (whose artifact cache is an emptyDir), sits next to
// the state in the object's namespace, goes with the object (owner
// reference), and needs nothing the controller does not already have. An
// artifact may hold secrets of its own, so it is never put in a ConfigMap.
// Like stored plans, it is split into chunks, and its size is bounded: a
// namespace's Secrets live in etcd.
package keptartifact

import (
	"bytes"
	"context"
	_ "crypto/sha512" // digest algorithms source-controller can be configured with
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/opencontainers/go-digest"
	_ "github.com/opencontainers/go-digest/blake3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/owned"
)

// Store keeps one artifact per Terraform object, in Secrets
// tfartifact-<owner>-<i> in the owner's namespace.
//
// Give it a client that reads Secrets from the API server, not from a
// cache of every Secret in the cluster.
type Store struct {
	Client client.Client
	// MaxSize bounds the artifact kept, in bytes (its compressed tarball):
	// DefaultMaxSize when zero; a negative MaxSize keeps no artifact.
	MaxSize int64
}

// DefaultMaxSize is Store.MaxSize when none is set: 4 MiB, eight chunks.
const DefaultMaxSize int64 = 4 << 20

// Errors callers map to conditions; test with errors.Is.
var (
	// ErrTooLarge: the artifact is larger than the store keeps.
	ErrTooLarge = errors.New("artifact too large to keep")
	// ErrNotFound: no intact copy of the wanted artifact is kept.
	ErrNotFound = errors.New("no kept artifact")
	// ErrDigestMismatch: the bytes are not those of the wanted digest.
	ErrDigestMismatch = errors.New("kept artifact digest mismatch")
)

// Labels, annotations and the type of the kept artifact's Secrets.
const (
	// ArtifactLabel marks the Secrets of kept artifacts.
	ArtifactLabel = "infra.landform.dev/kept-artifact"
	// SecretType is the type of those Secrets.
	SecretType = "infra.landform.dev/kept-artifact"

	annDigest   = "infra.landform.dev/artifact-digest"
	annRevision = "infra.landform.dev/artifact-revision"
	annChunks   = "infra.landform.dev/artifact-chunks"
	annChunk    = "infra.landform.dev/artifact-chunk"

	dataKey    = "artifact"
	fieldOwner = "landform-keptartifact"
)

// chunkSize keeps every Secret far below etcd's 1.5 MiB request limit.
const chunkSize = 512 << 10

// Limit is the largest artifact kept, in bytes; negative when none is.
func (s Store) Limit() int64 {
	if s.MaxSize == 0 {
		return DefaultMaxSize
	}
	return s.MaxSize
}

// Save keeps data, the artifact tarball of revision with digest want, as
// owner's artifact, replacing the one kept before. Data that does not
// match want is refused (ErrDigestMismatch), data over Limit too
// (ErrTooLarge); either way nothing is written. Chunk 0 carries the index
// and is written after the others, so that a reader finds the old
// artifact, the new one, or a set that fails the digest check.
func (s Store) Save(ctx context.Context, owner *v1alpha1.Terraform, revision, want string, data []byte) error {
	if limit := s.Limit(); int64(len(data)) > limit {
		return fmt.Errorf("%w: %d bytes, more than the %d kept", ErrTooLarge, len(data), max(limit, 0))
	}
	if err := verify(want, data); err != nil {
		return err
	}
	n := max(1, (len(data)+chunkSize-1)/chunkSize)
	labels := owned.Labels(owner)
	labels[ArtifactLabel] = "true"
	chunk := func(i int) *corev1ac.SecretApplyConfiguration {
		end := min(len(data), (i+1)*chunkSize)
		return corev1ac.Secret(chunkName(owner.Name, i), owner.Namespace).
			WithType(SecretType).
			WithLabels(labels).
			WithAnnotations(map[string]string{annDigest: want, annChunk: strconv.Itoa(i)}).
			WithOwnerReferences(owned.Reference(owner)).
			WithData(map[string][]byte{dataKey: data[i*chunkSize : end]})
	}
	for i := 1; i < n; i++ {
		if err := s.apply(ctx, chunk(i)); err != nil {
			return fmt.Errorf("keeping chunk %d of %d of artifact %s: %w", i, n, want, err)
		}
	}
	index := chunk(0).WithAnnotations(map[string]string{annRevision: revision, annChunks: strconv.Itoa(n)})
	if err := s.apply(ctx, index); err != nil {
		return fmt.Errorf("keeping the index of artifact %s: %w", want, err)
	}
	if err := s.deleteChunks(ctx, owner, n); err != nil {
		return fmt.Errorf("removing chunks left by the artifact kept before for %s/%s: %w", owner.Namespace, owner.Name, err)
	}
	return nil
}

func (s Store) apply(ctx context.Context, secret *corev1ac.SecretApplyConfiguration) error {
	return s.Client.Apply(ctx, secret, client.FieldOwner(fieldOwner), client.ForceOwnership)
}

// Has reports whether the kept artifact's index names digest want. It
// reads metadata only; Load checks the bytes.
func (s Store) Has(ctx context.Context, owner *v1alpha1.Terraform, want string) (bool, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := s.Client.Get(ctx, client.ObjectKey{Namespace: owner.Namespace, Name: chunkName(owner.Name, 0)}, m)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return m.Annotations[annDigest] == want, nil
}

// Load returns owner's kept artifact if it is the one with digest want,
// after checking its bytes against want: ErrNotFound when another artifact
// (or none, or an incomplete set) is kept, ErrDigestMismatch when the
// bytes do not match.
func (s Store) Load(ctx context.Context, owner *v1alpha1.Terraform, want string) ([]byte, error) {
	notFound := func(format string, args ...any) error {
		return fmt.Errorf("%w: artifact %s of %s/%s: %s", ErrNotFound, want, owner.Namespace, owner.Name, fmt.Sprintf(format, args...))
	}
	first, err := s.get(ctx, owner, 0)
	if err != nil {
		return nil, err
	}
	if first == nil {
		return nil, notFound("Secret %s does not exist", chunkName(owner.Name, 0))
	}
	if got := first.Annotations[annDigest]; got != want {
		return nil, notFound("the artifact kept is %q", got)
	}
	n, err := strconv.Atoi(first.Annotations[annChunks])
	if err != nil || n < 1 {
		return nil, notFound("Secret %s has no valid chunk count", first.Name)
	}
	var data bytes.Buffer
	data.Write(first.Data[dataKey])
	for i := 1; i < n; i++ {
		c, err := s.get(ctx, owner, i)
		if err != nil {
			return nil, err
		}
		if c == nil {
			return nil, notFound("chunk %d of %d is missing", i, n)
		}
		if c.Annotations[annDigest] != want {
			return nil, notFound("chunk %d of %d belongs to artifact %q", i, n, c.Annotations[annDigest])
		}
		data.Write(c.Data[dataKey])
	}
	if err := verify(want, data.Bytes()); err != nil {
		return nil, err
	}
	return data.Bytes(), nil
}

// get reads chunk i; nil when it does not exist.
func (s Store) get(ctx context.Context, owner *v1alpha1.Terraform, i int) (*corev1.Secret, error) {
	var secret corev1.Secret
	name := chunkName(owner.Name, i)
	err := s.Client.Get(ctx, client.ObjectKey{Namespace: owner.Namespace, Name: name}, &secret)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading kept artifact Secret %s/%s: %w", owner.Namespace, name, err)
	}
	return &secret, nil
}

// Delete removes owner's kept artifact. It succeeds when there is none.
func (s Store) Delete(ctx context.Context, owner *v1alpha1.Terraform) error {
	if err := s.deleteChunks(ctx, owner, 0); err != nil {
		return fmt.Errorf("deleting the kept artifact of %s/%s: %w", owner.Namespace, owner.Name, err)
	}
	return nil
}

// deleteChunks deletes owner's chunks numbered from and above, lowest
// first so that the index goes before the data it describes.
func (s Store) deleteChunks(ctx context.Context, owner *v1alpha1.Terraform, from int) error {
	labels := owned.Labels(owner)
	labels[ArtifactLabel] = "true"
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := s.Client.List(ctx, list, client.InNamespace(owner.Namespace), client.MatchingLabels(labels)); err != nil {
		return err
	}
	doomed := map[int]*metav1.PartialObjectMetadata{}
	for i := range list.Items {
		if idx, ok := chunkIndex(owner.Name, list.Items[i].Name); ok && idx >= from {
			doomed[idx] = &list.Items[i]
		}
	}
	var errs []error
	for _, idx := range slices.Sorted(maps.Keys(doomed)) {
		m := doomed[idx]
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name}}
		if err := s.Client.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// verify checks data against the digest want ("<algorithm>:<hex>").
func verify(want string, data []byte) error {
	d, err := digest.Parse(want)
	if err != nil {
		return fmt.Errorf("%w: invalid digest %q: %v", ErrDigestMismatch, want, err)
	}
	if !d.Algorithm().Available() {
		return fmt.Errorf("%w: digest algorithm %s is not available", ErrDigestMismatch, d.Algorithm())
	}
	if got := d.Algorithm().FromBytes(data); got != d {
		return fmt.Errorf("%w: the bytes are %s, not %s", ErrDigestMismatch, got, d)
	}
	return nil
}

// chunkName names chunk i of owner's kept artifact: "tfartifact-<owner>-<i>".
func chunkName(owner string, i int) string { return owned.ChunkName("tfartifact", owner, i) }

// chunkIndex returns i if name is chunk i of owner's kept artifact.
func chunkIndex(owner, name string) (int, bool) { return owned.ChunkIndex("tfartifact", owner, name) }
