// Package chunkstore keeps one blob per Terraform object and kind in
// Secrets of the object's namespace: a plan (internal/planstore), the
// artifact last applied (internal/keptartifact).
//
// Layout: the blob is cut into chunks of at most ChunkSize bytes, chunk i
// in Secret <kind>-<owner>-<i> (owned.ChunkName), under the Layout's data
// key. Every chunk carries the blob's digest and its own number in
// annotations, the owned labels (plus the caller's) and a controller
// owner reference to the object, so it goes when the object goes. Chunk
// 0 is the index: it also carries the chunk count and the caller's
// annotations, and it is written after all the others, so that a reader
// finds the old blob, the new one, or a set whose digests disagree.
//
// Chunked, because a Secret holds at most 1 MiB of data (and etcd takes
// requests of at most 1.5 MiB): the plan of a large module, or a source
// artifact, does not fit in one.
//
// Digest-verified, because whoever may write Secrets in the namespace may
// change a chunk (or a save cut short leaves chunks of two blobs): Read
// returns bytes only after they were reassembled and hashed to the digest
// the index records, and callers compare that digest with one kept where
// runners cannot write (status.plan.digest, status.lastAppliedArtifact):
// neither an apply nor a destroy runs from bytes Landform did not store.
package chunkstore

import (
	"bytes"
	"context"
	_ "crypto/sha256" // digest algorithms blobs may be named by
	_ "crypto/sha512"
	"encoding/json"
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
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/owned"
)

// ChunkSize keeps every Secret far below the 1 MiB a Secret may hold and
// etcd's 1.5 MiB request limit, with room for base64 in JSON requests and
// for metadata.
const ChunkSize = 512 << 10

// Layout is how one kind of blob is laid out in Secrets. Its names are
// part of what is stored: a Layout changed is blobs stored before lost.
type Layout struct {
	// Kind prefixes the Secret names: <Kind>-<owner>-<i>.
	Kind string
	// What the blob is, for messages ("plan").
	What string
	// Type is the type of the Secrets.
	Type corev1.SecretType
	// DataKey holds a chunk's bytes in the Secret's data.
	DataKey string
	// DigestAnnotation holds the blob's digest on every chunk,
	// ChunksAnnotation the chunk count on the index, and ChunkAnnotation
	// each chunk's number.
	DigestAnnotation, ChunksAnnotation, ChunkAnnotation string
	// DigestHex records only the hex of a sha256 digest in
	// DigestAnnotation (plans were stored so before this package), not
	// "<algorithm>:<hex>"; such a Layout stores sha256 digests alone.
	DigestHex bool
	// FieldOwner is the field manager of the Secrets' writes.
	FieldOwner string
}

// AnnotatedAs is l with its annotations named as the stores name theirs
// (plans' digest excepted): <prefix>-digest, <prefix>-chunks and
// <prefix>-chunk.
func (l Layout) AnnotatedAs(prefix string) Layout {
	l.DigestAnnotation, l.ChunksAnnotation, l.ChunkAnnotation = prefix+"-digest", prefix+"-chunks", prefix+"-chunk"
	return l
}

// ChunkName names chunk i of owner's blob.
func (l Layout) ChunkName(owner string, i int) string { return owned.ChunkName(l.Kind, owner, i) }

// ChunkIndex returns i when name is ChunkName(owner, i).
func (l Layout) ChunkIndex(owner, name string) (int, bool) {
	return owned.ChunkIndex(l.Kind, owner, name)
}

// Store writes, reads and deletes the blobs of one Layout.
//
// Blobs are large: give it a client that reads Secrets from the API
// server (or from a cache restricted to Landform's Secrets), not one that
// caches every Secret of the cluster. A cached read may also lag a Write,
// which Read reports as ErrNotFound until the cache catches up.
type Store struct {
	Client client.Client
	Layout Layout
}

// Blob is one stored blob.
type Blob struct {
	// Data is the blob; nil from Stat.
	Data []byte
	// Digest names Data. Write computes its sha256 when it is empty, and
	// refuses Data that does not match it otherwise.
	Digest digest.Digest
	// Labels are on every chunk, besides owned.Labels of the owner.
	Labels map[string]string
	// Annotations are on the index, besides the Layout's own.
	Annotations map[string]string

	// version is the index's resourceVersion, for Annotate.
	version string
}

// Errors of Read, Stat and Write; test with errors.Is. Their messages say
// only what was found ("chunk 2 of 3 (Secret tfplan-name-2) is missing"),
// for callers to wrap in their own terms: which blob of which object.
var (
	// ErrNotFound: no intact blob is stored (or not the one wanted): no
	// index, an unreadable one, a chunk missing or of another blob.
	ErrNotFound = errors.New("blob not found")
	// ErrDigestMismatch: the bytes are not those of the digest.
	ErrDigestMismatch = errors.New("blob digest mismatch")
)

// failure is an ErrNotFound or ErrDigestMismatch whose message is only
// the detail.
type failure struct {
	kind error
	msg  string
}

func (f *failure) Error() string { return f.msg }
func (f *failure) Unwrap() error { return f.kind }

func fail(kind error, format string, args ...any) error {
	return &failure{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// Write stores b as owner's blob, replacing the one stored before, and
// returns its digest. Bytes that do not match b.Digest are refused
// (ErrDigestMismatch) before anything is written.
//
// It reads the previous index to delete the chunks the new blob does not
// use by name: it lists Secrets (metadata only) just when that index is
// unreadable, because a namespace's Secrets grow with every object in it.
func (s Store) Write(ctx context.Context, owner *v1alpha1.Terraform, b Blob) (digest.Digest, error) {
	d, err := s.digestOf(b.Data, b.Digest)
	if err != nil {
		return "", err
	}
	prev, err := s.storedChunks(ctx, owner)
	if err != nil {
		return "", err
	}
	recorded := s.format(d)
	n := max(1, (len(b.Data)+ChunkSize-1)/ChunkSize)
	labels := owned.Labels(owner)
	maps.Copy(labels, b.Labels)
	chunk := func(i int) *corev1ac.SecretApplyConfiguration {
		end := min(len(b.Data), (i+1)*ChunkSize)
		return corev1ac.Secret(s.Layout.ChunkName(owner.Name, i), owner.Namespace).
			WithType(s.Layout.Type).
			WithLabels(labels).
			WithAnnotations(map[string]string{
				s.Layout.DigestAnnotation: recorded,
				s.Layout.ChunkAnnotation:  strconv.Itoa(i),
			}).
			WithOwnerReferences(owned.Reference(owner)).
			WithData(map[string][]byte{s.Layout.DataKey: b.Data[i*ChunkSize : end]})
	}
	for i := 1; i < n; i++ {
		if err := s.apply(ctx, chunk(i)); err != nil {
			return "", fmt.Errorf("storing chunk %d of %d of the %s of %s/%s: %w", i, n, s.Layout.What, owner.Namespace, owner.Name, err)
		}
	}
	index := chunk(0).
		WithAnnotations(b.Annotations).
		WithAnnotations(map[string]string{s.Layout.ChunksAnnotation: strconv.Itoa(n)})
	if err := s.apply(ctx, index); err != nil {
		return "", fmt.Errorf("storing the index of the %s of %s/%s: %w", s.Layout.What, owner.Namespace, owner.Name, err)
	}
	if err := s.removeChunksAbove(ctx, owner, n, prev); err != nil {
		return "", fmt.Errorf("removing chunks left by the previous %s of %s/%s: %w", s.Layout.What, owner.Namespace, owner.Name, err)
	}
	return d, nil
}

// digestOf is data's digest: want, after checking data against it, or its
// sha256 when want is empty.
func (s Store) digestOf(data []byte, want digest.Digest) (digest.Digest, error) {
	if want == "" {
		return digest.SHA256.FromBytes(data), nil
	}
	if err := want.Validate(); err != nil {
		return "", fail(ErrDigestMismatch, "invalid digest %q: %v", want, err)
	}
	if s.Layout.DigestHex && want.Algorithm() != digest.SHA256 {
		return "", fail(ErrDigestMismatch, "digest %s is not sha256, the only algorithm stored", want)
	}
	if got := want.Algorithm().FromBytes(data); got != want {
		return "", fail(ErrDigestMismatch, "the bytes are %s, not %s", got, want)
	}
	return want, nil
}

// format is d as DigestAnnotation records it.
func (s Store) format(d digest.Digest) string {
	if s.Layout.DigestHex {
		return d.Encoded()
	}
	return d.String()
}

// parse reads a DigestAnnotation; false when it names no valid digest.
func (s Store) parse(recorded string) (digest.Digest, bool) {
	d := digest.Digest(recorded)
	if s.Layout.DigestHex {
		d = digest.NewDigestFromEncoded(digest.SHA256, recorded)
	}
	if d.Validate() != nil {
		return "", false
	}
	return d, true
}

// storedChunks is how many chunks the stored index names: 0 when there is
// no index (a first write; chunks of a write cut short before its index
// are overwritten by the next one, or go with Delete), -1 when it is
// unreadable and the chunks must be listed.
func (s Store) storedChunks(ctx context.Context, owner *v1alpha1.Terraform) (int, error) {
	m, err := s.getMeta(ctx, owner)
	if err != nil || m == nil {
		return 0, err
	}
	n, err := strconv.Atoi(m.Annotations[s.Layout.ChunksAnnotation])
	if err != nil || n < 1 {
		return -1, nil
	}
	return n, nil
}

// removeChunksAbove deletes the chunks from n up to prev by name; prev -1
// (unknown) lists them.
func (s Store) removeChunksAbove(ctx context.Context, owner *v1alpha1.Terraform, n, prev int) error {
	if prev < 0 {
		return s.deleteChunks(ctx, owner, n)
	}
	var errs []error
	for i := n; i < prev; i++ {
		if err := s.deleteChunk(ctx, owner.Namespace, s.Layout.ChunkName(owner.Name, i)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s Store) apply(ctx context.Context, secret *corev1ac.SecretApplyConfiguration) error {
	return s.Client.Apply(ctx, secret, client.FieldOwner(s.Layout.FieldOwner), client.ForceOwnership)
}

// ours reports whether a Secret is one of owner's chunks: its controller
// reference names owner's UID, as every chunk's has since chunks were
// written. A Secret under a chunk's name that is not ours (another
// object's, a state the engine's backend named so) is never read as a
// blob, written over or deleted.
func ours(owner *v1alpha1.Terraform, m *metav1.ObjectMeta) bool {
	ref := metav1.GetControllerOfNoCopy(m)
	return ref != nil && ref.UID == owner.UID
}

// NotOwnedError is a Secret under one of owner's chunk names that is not
// owner's: Write refuses to write over it.
type NotOwnedError struct{ Namespace, Name string }

func (e *NotOwnedError) Error() string {
	return fmt.Sprintf("Secret %s/%s exists and belongs to something else: refusing to write over it", e.Namespace, e.Name)
}

// getMeta reads the index's metadata; nil when it does not exist, and a
// *NotOwnedError when it is not owner's.
func (s Store) getMeta(ctx context.Context, owner *v1alpha1.Terraform) (*metav1.PartialObjectMetadata, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	name := s.Layout.ChunkName(owner.Name, 0)
	err := s.Client.Get(ctx, client.ObjectKey{Namespace: owner.Namespace, Name: name}, m)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s Secret %s/%s: %w", s.Layout.What, owner.Namespace, name, err)
	}
	if !ours(owner, &m.ObjectMeta) {
		return nil, &NotOwnedError{Namespace: owner.Namespace, Name: name}
	}
	return m, nil
}

// get reads chunk i; nil when it does not exist.
func (s Store) get(ctx context.Context, owner *v1alpha1.Terraform, i int) (*corev1.Secret, error) {
	var secret corev1.Secret
	name := s.Layout.ChunkName(owner.Name, i)
	err := s.Client.Get(ctx, client.ObjectKey{Namespace: owner.Namespace, Name: name}, &secret)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s Secret %s/%s: %w", s.Layout.What, owner.Namespace, name, err)
	}
	return &secret, nil
}

// index reads what the index's metadata says about the blob: its digest,
// chunk count, labels and annotations.
func (s Store) index(owner *v1alpha1.Terraform, m *metav1.ObjectMeta) (*Blob, int, error) {
	if m == nil {
		return nil, 0, fail(ErrNotFound, "Secret %s does not exist", s.Layout.ChunkName(owner.Name, 0))
	}
	n, err := strconv.Atoi(m.Annotations[s.Layout.ChunksAnnotation])
	d, ok := s.parse(m.Annotations[s.Layout.DigestAnnotation])
	if err != nil || n < 1 || !ok {
		return nil, 0, fail(ErrNotFound, "Secret %s has no valid index annotations", m.Name)
	}
	return &Blob{Digest: d, Labels: maps.Clone(m.Labels), Annotations: maps.Clone(m.Annotations), version: m.ResourceVersion}, n, nil
}

// Stat returns owner's blob without its Data, from the index's metadata
// alone: neither the bytes nor their digest are read.
func (s Store) Stat(ctx context.Context, owner *v1alpha1.Terraform) (*Blob, error) {
	m, err := s.getMeta(ctx, owner)
	var foreign *NotOwnedError
	if errors.As(err, &foreign) {
		return nil, fail(ErrNotFound, "%v", err)
	}
	if err != nil {
		return nil, err
	}
	var meta *metav1.ObjectMeta
	if m != nil {
		meta = &m.ObjectMeta
	}
	b, _, err := s.index(owner, meta)
	return b, err
}

// Read returns owner's blob after checking that every chunk belongs to it
// and that the bytes reassembled have the digest the index records. With
// want set, only the blob of that digest is read: another one is
// ErrNotFound. A blob whose index was read but whose bytes are not intact
// comes back without Data beside its error, to say which blob it was.
func (s Store) Read(ctx context.Context, owner *v1alpha1.Terraform, want digest.Digest) (*Blob, error) {
	first, err := s.get(ctx, owner, 0)
	if err != nil {
		return nil, err
	}
	var meta *metav1.ObjectMeta
	if first != nil {
		if !ours(owner, &first.ObjectMeta) {
			return nil, fail(ErrNotFound, "%v", &NotOwnedError{Namespace: owner.Namespace, Name: first.Name})
		}
		meta = &first.ObjectMeta
	}
	b, n, err := s.index(owner, meta)
	if err != nil {
		return nil, err
	}
	if want != "" && b.Digest != want {
		return b, fail(ErrNotFound, "the one stored is %s, not %s", b.Digest, want)
	}
	recorded := first.Annotations[s.Layout.DigestAnnotation]
	var data bytes.Buffer
	data.Write(first.Data[s.Layout.DataKey])
	for i := 1; i < n; i++ {
		c, err := s.get(ctx, owner, i)
		if err != nil {
			return nil, err
		}
		name := s.Layout.ChunkName(owner.Name, i)
		if c == nil {
			return b, fail(ErrNotFound, "chunk %d of %d (Secret %s) is missing", i, n, name)
		}
		if !ours(owner, &c.ObjectMeta) {
			return b, fail(ErrNotFound, "chunk %d of %d: %v", i, n, &NotOwnedError{Namespace: owner.Namespace, Name: name})
		}
		// A chunk of another blob means a Write is under way or was cut short.
		if c.Annotations[s.Layout.DigestAnnotation] != recorded || c.Annotations[s.Layout.ChunkAnnotation] != strconv.Itoa(i) {
			return b, fail(ErrNotFound, "chunk %d of %d (Secret %s) belongs to another %s", i, n, name, s.Layout.What)
		}
		data.Write(c.Data[s.Layout.DataKey])
	}
	if got := b.Digest.Algorithm().FromBytes(data.Bytes()); got != b.Digest {
		return b, fail(ErrDigestMismatch, "the bytes reassembled are %s, not the %s recorded", got, b.Digest)
	}
	b.Data = data.Bytes()
	return b, nil
}

// Annotate sets annotations on the index of b, which Stat or Read
// returned. It fails with a conflict when the index changed since (a
// Write raced it), so that it never marks another blob. What it sets
// stays on the index until a Write sets those annotations again.
func (s Store) Annotate(ctx context.Context, owner *v1alpha1.Terraform, b *Blob, annotations map[string]string) error {
	if b.version == "" {
		return fmt.Errorf("annotating the %s of %s/%s: the blob was not read from the store", s.Layout.What, owner.Namespace, owner.Name)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": b.version,
		"annotations":     annotations,
	}})
	if err != nil {
		return err
	}
	// Metadata only: the answer would otherwise carry the chunk's data.
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: owner.Namespace, Name: s.Layout.ChunkName(owner.Name, 0)}}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := s.Client.Patch(ctx, m, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(s.Layout.FieldOwner)); err != nil {
		return fmt.Errorf("annotating the %s of %s/%s: %w", s.Layout.What, owner.Namespace, owner.Name, err)
	}
	b.Annotations = maps.Clone(m.Annotations)
	b.version = m.ResourceVersion
	return nil
}

// Delete removes owner's blob, and chunks left by writes cut short. It
// succeeds when there is none.
func (s Store) Delete(ctx context.Context, owner *v1alpha1.Terraform) error {
	if err := s.deleteChunks(ctx, owner, 0); err != nil {
		return fmt.Errorf("deleting the %s of %s/%s: %w", s.Layout.What, owner.Namespace, owner.Name, err)
	}
	return nil
}

// deleteChunks lists owner's chunks (metadata only) and deletes those
// numbered from and above, lowest first so that the index goes before the
// data it describes.
func (s Store) deleteChunks(ctx context.Context, owner *v1alpha1.Terraform, from int) error {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := s.Client.List(ctx, list, client.InNamespace(owner.Namespace), client.MatchingLabels(owned.Labels(owner))); err != nil {
		return err
	}
	var doomed []int
	for _, m := range list.Items {
		if !ours(owner, &m.ObjectMeta) {
			continue
		}
		if i, ok := s.Layout.ChunkIndex(owner.Name, m.Name); ok && i >= from {
			doomed = append(doomed, i)
		}
	}
	slices.Sort(doomed)
	var errs []error
	for _, i := range doomed {
		if err := s.deleteChunk(ctx, owner.Namespace, s.Layout.ChunkName(owner.Name, i)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deleteChunk deletes one chunk; nil when it is gone already.
func (s Store) deleteChunk(ctx context.Context, namespace, name string) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := s.Client.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
