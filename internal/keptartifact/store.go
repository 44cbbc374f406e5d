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
// Like stored plans, it is split into chunks and verified by its digest
// (internal/chunkstore), and its size is bounded: a namespace's Secrets
// live in etcd.
package keptartifact

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/opencontainers/go-digest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/chunkstore"
)

// Store keeps one artifact per Terraform object, in Secrets
// tfartifact-<owner>-<i> in the owner's namespace.
//
// Give it a client that reads Secrets from the API server, not from a
// cache of every Secret in the cluster.
type Store struct {
	Client client.Client
	// MaxSize bounds the artifact kept, in bytes (its compressed tarball):
	// DefaultMaxSize when zero; a negative MaxSize keeps no artifact
	// (MaxSizeFlag maps a person's 0 there).
	MaxSize int64
}

// DefaultMaxSize is Store.MaxSize when none is set: 4 MiB, eight chunks.
const DefaultMaxSize int64 = 4 << 20

// MaxSizeFlag is the controller's --kept-artifact-max-size, a pflag.Value
// over a Store.MaxSize. A person's 0 bytes keeps no artifact, as a
// negative size does; a zero Store.MaxSize is DefaultMaxSize instead, so
// that a Store built without a bound keeps artifacts. Set stores 0 as -1.
type MaxSizeFlag int64

// Set parses a size in bytes.
func (m *MaxSizeFlag) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		return err
	}
	if n <= 0 {
		n = -1
	}
	*m = MaxSizeFlag(n)
	return nil
}

func (m *MaxSizeFlag) String() string { return strconv.FormatInt(int64(*m), 10) }

// Type is pflag's int64's, so that the help reads "int".
func (m *MaxSizeFlag) Type() string { return "int64" }

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

	// annPrefix-digest, -chunks and -chunk are the layout's annotations.
	annPrefix   = "infra.landform.dev/artifact"
	annRevision = annPrefix + "-revision"

	dataKey    = "artifact"
	fieldOwner = "landform-keptartifact"
)

// layout is where kept artifacts are in Secrets; the digest recorded is
// the source's ("<algorithm>:<hex>"), whichever algorithm it uses.
var layout = chunkstore.Layout{Kind: "tfartifact", What: "artifact", Type: SecretType, DataKey: dataKey, FieldOwner: fieldOwner}.AnnotatedAs(annPrefix)

// ChunkName names chunk i of owner's kept artifact Secrets (tfartifact-<name>-<i>).
func ChunkName(owner *v1alpha1.Terraform, i int) string { return layout.ChunkName(owner.Name, i) }

func (s Store) chunks() chunkstore.Store { return chunkstore.Store{Client: s.Client, Layout: layout} }

// Limit is the largest artifact kept, in bytes; negative when none is.
func (s Store) Limit() int64 {
	if s.MaxSize == 0 {
		return DefaultMaxSize
	}
	return s.MaxSize
}

// kept says this package's ErrNotFound or ErrDigestMismatch for the
// chunk store's, naming the artifact wanted.
func kept(owner *v1alpha1.Terraform, want string, err error) error {
	kind := ErrNotFound
	switch {
	case errors.Is(err, chunkstore.ErrDigestMismatch):
		kind = ErrDigestMismatch
	case !errors.Is(err, chunkstore.ErrNotFound):
		return err
	}
	return fmt.Errorf("%w: artifact %s of %s/%s: %w", kind, want, owner.Namespace, owner.Name, err)
}

// Save keeps data, the artifact tarball of revision with digest want, as
// owner's artifact, replacing the one kept before. Data that does not
// match want is refused (ErrDigestMismatch), data over Limit too
// (ErrTooLarge); either way nothing is written.
func (s Store) Save(ctx context.Context, owner *v1alpha1.Terraform, revision, want string, data []byte) error {
	if limit := s.Limit(); int64(len(data)) > limit {
		return fmt.Errorf("%w: %d bytes, more than the %d kept", ErrTooLarge, len(data), max(limit, 0))
	}
	_, err := s.chunks().Write(ctx, owner, chunkstore.Blob{
		Data:        data,
		Digest:      digest.Digest(want),
		Labels:      map[string]string{ArtifactLabel: "true"},
		Annotations: map[string]string{annRevision: revision},
	})
	if err != nil {
		return kept(owner, want, err)
	}
	return nil
}

// Has reports whether the kept artifact's index names digest want. It
// reads metadata only; Load checks the bytes.
func (s Store) Has(ctx context.Context, owner *v1alpha1.Terraform, want string) (bool, error) {
	b, err := s.chunks().Stat(ctx, owner)
	if errors.Is(err, chunkstore.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return b.Digest == digest.Digest(want), nil
}

// Load returns owner's kept artifact if it is the one with digest want,
// after checking its bytes against want: ErrNotFound when another artifact
// (or none, or an incomplete set) is kept, ErrDigestMismatch when the
// bytes do not match.
func (s Store) Load(ctx context.Context, owner *v1alpha1.Terraform, want string) ([]byte, error) {
	if want == "" {
		return nil, fmt.Errorf("%w: no digest to load %s/%s's by", ErrNotFound, owner.Namespace, owner.Name)
	}
	b, err := s.chunks().Read(ctx, owner, digest.Digest(want))
	if err != nil {
		return nil, kept(owner, want, err)
	}
	return b.Data, nil
}

// Delete removes owner's kept artifact. It succeeds when there is none.
func (s Store) Delete(ctx context.Context, owner *v1alpha1.Terraform) error {
	return s.chunks().Delete(ctx, owner)
}
