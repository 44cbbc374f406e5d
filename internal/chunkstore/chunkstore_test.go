package chunkstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/testenv"
)

// blobs records digests as "<algorithm>:<hex>", like kept artifacts;
// hexBlobs records bare sha256 hex, like plans.
var (
	blobs = Layout{
		Kind: "tfblob", What: "blob", Type: "infra.landform.dev/test-blob", DataKey: "blob",
		DigestAnnotation: "test.landform.dev/digest", ChunksAnnotation: "test.landform.dev/chunks", ChunkAnnotation: "test.landform.dev/chunk",
		FieldOwner: "landform-chunkstore-test",
	}
	hexBlobs = Layout{
		Kind: "tfhex", What: "hex blob", Type: "infra.landform.dev/test-hex", DataKey: "hex",
		DigestAnnotation: "test.landform.dev/sha256", ChunksAnnotation: "test.landform.dev/chunks", ChunkAnnotation: "test.landform.dev/chunk",
		DigestHex: true, FieldOwner: "landform-chunkstore-test",
	}
)

// secrets lists owner's chunks of layout l by name, read whole.
func secrets(t *testing.T, l Layout, owner *v1alpha1.Terraform) map[string]corev1.Secret {
	t.Helper()
	return env.Secrets(t, owner.Namespace, func(name string) bool {
		_, ok := l.ChunkIndex(owner.Name, name)
		return ok
	})
}

func names(m map[string]corev1.Secret) []string { return slices.Sorted(maps.Keys(m)) }

// calls counts a client's requests, and which Secret reads were of the
// whole Secret rather than of its metadata.
type calls struct {
	lists, fullLists, gets, fullGets, applies int
	failApply                                 func(name string) bool
}

func (c *calls) client(t *testing.T) client.Client {
	t.Helper()
	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return interceptor.NewClient(direct, interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			c.gets++
			if _, ok := obj.(*corev1.Secret); ok {
				c.fullGets++
			}
			return cl.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			c.lists++
			if _, ok := list.(*corev1.SecretList); ok {
				c.fullLists++
			}
			return cl.List(ctx, list, opts...)
		},
		Apply: func(ctx context.Context, cl client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			c.applies++
			if c.failApply != nil {
				if name := obj.(interface{ GetName() *string }).GetName(); c.failApply(*name) {
					return errors.New("injected apply failure")
				}
			}
			return cl.Apply(ctx, obj, opts...)
		},
	})
}

// A blob of several chunks comes back byte for byte, laid out as the
// package says: named chunks no larger than ChunkSize, labelled and owned
// by the object, the digest and number on each, the count and the
// caller's annotations on the index alone.
func TestWriteReadLayout(t *testing.T) {
	ctx := context.Background()
	owner := env.Owner(t, "app")
	store := Store{Client: env.Client, Layout: blobs}

	data := testenv.RandomBytes(t, 3*ChunkSize+123)
	d := mustWrite(t, store, owner, Blob{Data: data, Labels: map[string]string{"test.landform.dev/kind": "big"}, Annotations: map[string]string{"test.landform.dev/revision": "r1"}})
	if want := digest.SHA256.FromBytes(data); d != want {
		t.Errorf("Write = %s, want the sha256 %s", d, want)
	}
	got := secrets(t, blobs, owner)
	if n := names(got); !slices.Equal(n, []string{"tfblob-app-0", "tfblob-app-1", "tfblob-app-2", "tfblob-app-3"}) {
		t.Fatalf("Secrets %v, want 4 chunks", n)
	}
	for name, s := range got {
		i, _ := blobs.ChunkIndex("app", name)
		if n := len(s.Data["blob"]); n > ChunkSize || (i < 3 && n != ChunkSize) {
			t.Errorf("%s holds %d bytes", name, n)
		}
		if s.Type != blobs.Type {
			t.Errorf("%s type %q", name, s.Type)
		}
		if s.Labels[v1alpha1.ManagedByLabel] != v1alpha1.ManagedByValue || s.Labels[v1alpha1.OwnerNameLabel] != "app" || s.Labels["test.landform.dev/kind"] != "big" {
			t.Errorf("%s labels %v", name, s.Labels)
		}
		refs := s.OwnerReferences
		if len(refs) != 1 || !metav1.IsControlledBy(&s, owner) || refs[0].BlockOwnerDeletion == nil || !*refs[0].BlockOwnerDeletion {
			t.Errorf("%s owner references %+v, want one controller reference to the Terraform object", name, refs)
		}
		want := map[string]string{"test.landform.dev/digest": d.String(), "test.landform.dev/chunk": fmt.Sprint(i)}
		if i == 0 {
			want["test.landform.dev/chunks"] = "4"
			want["test.landform.dev/revision"] = "r1"
		}
		if !maps.Equal(s.Annotations, want) {
			t.Errorf("%s annotations %v, want %v", name, s.Annotations, want)
		}
	}

	b, err := store.Read(ctx, owner, "")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Data, data) || b.Digest != d || b.Annotations["test.landform.dev/revision"] != "r1" || b.Labels["test.landform.dev/kind"] != "big" {
		t.Errorf("Read = %d bytes, digest %s, annotations %v, labels %v", len(b.Data), b.Digest, b.Annotations, b.Labels)
	}
	if b, err := store.Read(ctx, owner, d); err != nil || !bytes.Equal(b.Data, data) {
		t.Errorf("Read(%s) = %v", d, err)
	}
}

// A digest given with the bytes is checked before anything is written,
// whichever algorithm names it, and recorded as given; a hex layout
// records the bare sha256.
func TestWriteDigests(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	data := testenv.RandomBytes(t, ChunkSize+10)

	for i, d := range []digest.Digest{digest.SHA256.FromBytes(data), digest.SHA512.FromBytes(data), digest.BLAKE3.FromBytes(data)} {
		owner := env.Terraform(t, ns, fmt.Sprintf("alg-%d", i))
		store := Store{Client: env.Client, Layout: blobs}
		if got, err := store.Write(ctx, owner, Blob{Data: data, Digest: d}); err != nil || got != d {
			t.Fatalf("Write(%s) = %s, %v", d.Algorithm(), got, err)
		}
		if got := secrets(t, blobs, owner)[blobs.ChunkName(owner.Name, 1)].Annotations[blobs.DigestAnnotation]; got != d.String() {
			t.Errorf("%s recorded as %q", d.Algorithm(), got)
		}
		if b, err := store.Read(ctx, owner, d); err != nil || !bytes.Equal(b.Data, data) {
			t.Errorf("Read(%s) = %v", d.Algorithm(), err)
		}
	}

	owner := env.Terraform(t, ns, "refused")
	for _, tt := range []struct {
		l    Layout
		d    digest.Digest
		want string
	}{
		{blobs, digest.SHA256.FromBytes([]byte("other")), "the bytes are"},
		{blobs, "sha256:nothex", "invalid digest"},
		{blobs, "md5:d41d8cd98f00b204e9800998ecf8427e", "invalid digest"},
		{hexBlobs, digest.SHA512.FromBytes(data), "not sha256"},
	} {
		_, err := Store{Client: env.Client, Layout: tt.l}.Write(ctx, owner, Blob{Data: data, Digest: tt.d})
		if !errors.Is(err, ErrDigestMismatch) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Write(%q) = %v, want ErrDigestMismatch saying %q", tt.d, err, tt.want)
		}
	}
	if got := len(secrets(t, blobs, owner)) + len(secrets(t, hexBlobs, owner)); got != 0 {
		t.Errorf("refused writes left %d Secrets", got)
	}

	store := Store{Client: env.Client, Layout: hexBlobs}
	d := mustWrite(t, store, owner, Blob{Data: data})
	if got := secrets(t, hexBlobs, owner)[hexBlobs.ChunkName(owner.Name, 0)].Annotations[hexBlobs.DigestAnnotation]; got != d.Encoded() || d.Algorithm() != digest.SHA256 {
		t.Errorf("hex layout recorded %q for %s", got, d)
	}
	if b, err := store.Stat(ctx, owner); err != nil || b.Digest != d {
		t.Errorf("Stat = %+v, %v; want digest %s", b, err, d)
	}
	if b, err := store.Read(ctx, owner, d); err != nil || !bytes.Equal(b.Data, data) {
		t.Errorf("Read = %v", err)
	}
}

// Replacing a blob by a smaller one reads the previous index (metadata
// only) and deletes its extra chunks by name: no list of the namespace's
// Secrets, which grows with every object in it.
func TestWriteRemovesExtraChunksByName(t *testing.T) {
	ctx := context.Background()
	owner := env.Owner(t, "shrink")
	c, store := countingStore(t)

	mustWrite(t, store, owner, Blob{Data: testenv.RandomBytes(t, 3*ChunkSize)})
	small := []byte("small")
	mustWrite(t, store, owner, Blob{Data: small})
	if c.lists != 0 || c.fullGets != 0 {
		t.Errorf("two writes made %d lists and %d reads of whole Secrets, want none", c.lists, c.fullGets)
	}
	if n := names(secrets(t, blobs, owner)); !slices.Equal(n, []string{"tfblob-shrink-0"}) {
		t.Errorf("after a small blob, Secrets %v, want only tfblob-shrink-0", n)
	}
	if b, err := store.Read(ctx, owner, ""); err != nil || !bytes.Equal(b.Data, small) {
		t.Errorf("Read = %v", err)
	}
}

// An unreadable previous index leaves the chunk count unknown: the write
// lists the chunks, by their metadata, to remove the extra ones.
func TestWriteAfterUnreadableIndexListsMetadata(t *testing.T) {
	owner := env.Owner(t, "unreadable")
	mustWrite(t, Store{Client: env.Client, Layout: blobs}, owner, Blob{Data: testenv.RandomBytes(t, 2*ChunkSize+1)})
	env.UpdateSecret(t, owner.Namespace, "tfblob-unreadable-0", func(s *corev1.Secret) { delete(s.Annotations, blobs.ChunksAnnotation) })

	c, store := countingStore(t)
	mustWrite(t, store, owner, Blob{Data: []byte("small")})
	if c.lists != 1 || c.fullLists != 0 {
		t.Errorf("%d lists, %d of whole Secrets; want one list of metadata", c.lists, c.fullLists)
	}
	if n := names(secrets(t, blobs, owner)); !slices.Equal(n, []string{"tfblob-unreadable-0"}) {
		t.Errorf("Secrets %v, want only tfblob-unreadable-0", n)
	}
}

// Read returns no bytes that are not those stored whole: a torn, changed
// or incomplete set, or no index, is an error, and so is another blob
// than the one wanted.
func TestReadRefusesWhatIsNotIntact(t *testing.T) {
	// annotate sets annotation key of chunk i to value, as someone who may
	// write Secrets could; drop deletes chunk i.
	annotate := func(i int, key, value string) func(*testing.T, *v1alpha1.Terraform) {
		return func(t *testing.T, owner *v1alpha1.Terraform) {
			env.UpdateSecret(t, owner.Namespace, blobs.ChunkName(owner.Name, i), func(s *corev1.Secret) { s.Annotations[key] = value })
		}
	}
	drop := func(i int) func(*testing.T, *v1alpha1.Terraform) {
		return func(t *testing.T, owner *v1alpha1.Terraform) {
			env.DeleteSecret(t, owner.Namespace, blobs.ChunkName(owner.Name, i))
		}
	}
	tests := []struct {
		name   string
		tamper func(t *testing.T, owner *v1alpha1.Terraform)
		kind   error
		want   string
		// indexed: the index is intact, and comes back with the error.
		indexed bool
	}{
		{"data changed", func(t *testing.T, owner *v1alpha1.Terraform) {
			env.UpdateSecret(t, owner.Namespace, blobs.ChunkName(owner.Name, 2), func(s *corev1.Secret) { s.Data["blob"][100] ^= 0xff })
		}, ErrDigestMismatch, "not the sha256:", true},
		{"chunk missing", drop(1), ErrNotFound, "chunk 1 of 4 (Secret tfblob-tamper-1-1) is missing", true},
		{"chunk of another blob", annotate(1, blobs.DigestAnnotation, "sha256:other"), ErrNotFound, "belongs to another blob", true},
		{"chunk in another place", annotate(1, blobs.ChunkAnnotation, "2"), ErrNotFound, "belongs to another blob", true},
		{"count too small", annotate(0, blobs.ChunksAnnotation, "2"), ErrDigestMismatch, "not the sha256:", true},
		{"count unreadable", annotate(0, blobs.ChunksAnnotation, "x"), ErrNotFound, "no valid index", false},
		{"digest unreadable", annotate(0, blobs.DigestAnnotation, "sha256:x"), ErrNotFound, "no valid index", false},
		{"no index", drop(0), ErrNotFound, "Secret tfblob-tamper-7-0 does not exist", false},
	}
	ns := env.Namespace(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			owner := env.Terraform(t, ns, fmt.Sprintf("tamper-%d", i))
			store := Store{Client: env.Client, Layout: blobs}
			mustWrite(t, store, owner, Blob{Data: testenv.RandomBytes(t, 3*ChunkSize+1)})
			tt.tamper(t, owner)
			b, err := store.Read(ctx, owner, "")
			if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Read = %v, want %v saying %q", err, tt.kind, tt.want)
			}
			if b != nil && b.Data != nil {
				t.Errorf("Read returned %d bytes with its error", len(b.Data))
			}
			if (b != nil) != tt.indexed {
				t.Errorf("Read returned the index with its error: %t, want %t", b != nil, tt.indexed)
			}
		})
	}
}

// Asked for another blob than the one stored, Read says so from the index
// without reading the other chunks.
func TestReadAnotherBlob(t *testing.T) {
	ctx := context.Background()
	owner := env.Owner(t, "other")
	c, store := countingStore(t)
	mustWrite(t, store, owner, Blob{Data: testenv.RandomBytes(t, 3*ChunkSize)})
	c.gets = 0
	want := digest.SHA256.FromBytes([]byte("wanted"))
	if _, err := store.Read(ctx, owner, want); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "not "+want.String()) {
		t.Errorf("Read(another) = %v, want ErrNotFound naming %s", err, want)
	}
	if c.gets != 1 {
		t.Errorf("Read of another blob made %d reads, want the index's alone", c.gets)
	}
}

// Stat reads the index's metadata, never a chunk's data.
func TestStat(t *testing.T) {
	ctx := context.Background()
	owner := env.Owner(t, "stat")
	c, store := countingStore(t)
	if _, err := store.Stat(ctx, owner); !errors.Is(err, ErrNotFound) {
		t.Errorf("Stat of nothing = %v, want ErrNotFound", err)
	}
	d := mustWrite(t, store, owner, Blob{Data: testenv.RandomBytes(t, 2*ChunkSize), Annotations: map[string]string{"test.landform.dev/revision": "r1"}})
	c.gets, c.fullGets = 0, 0
	b, err := store.Stat(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	if b.Data != nil || b.Digest != d || b.Annotations["test.landform.dev/revision"] != "r1" {
		t.Errorf("Stat = %d bytes, digest %s, annotations %v", len(b.Data), b.Digest, b.Annotations)
	}
	if c.gets != 1 || c.fullGets != 0 {
		t.Errorf("Stat made %d reads, %d of whole Secrets; want one of metadata", c.gets, c.fullGets)
	}
}

// Annotate marks the blob it was given, never one written since; the
// mark stays on the index until a Write sets the annotation again.
func TestAnnotate(t *testing.T) {
	ctx := context.Background()
	owner := env.Owner(t, "mark")
	store := Store{Client: env.Client, Layout: blobs}
	const mark = "test.landform.dev/mark"
	mustWrite(t, store, owner, Blob{Data: []byte("one"), Annotations: map[string]string{mark: "no"}})
	b, err := store.Stat(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Annotate(ctx, owner, b, map[string]string{mark: "yes"}); err != nil {
		t.Fatal(err)
	}
	if b.Annotations[mark] != "yes" {
		t.Errorf("the Blob's annotations %v after Annotate", b.Annotations)
	}
	if got, err := store.Read(ctx, owner, ""); err != nil || got.Annotations[mark] != "yes" || string(got.Data) != "one" {
		t.Errorf("Read after Annotate = %+v, %v", got, err)
	}

	// A write races the mark: the mark fails.
	mustWrite(t, store, owner, Blob{Data: []byte("two"), Annotations: map[string]string{mark: "no"}})
	if got, _ := store.Stat(ctx, owner); got == nil || got.Annotations[mark] != "no" {
		t.Fatalf("a new Write kept the mark: %+v", got)
	}
	if err := store.Annotate(ctx, owner, b, map[string]string{mark: "yes"}); !apierrors.IsConflict(err) {
		t.Errorf("Annotate of a replaced blob = %v, want a conflict", err)
	}
	if got, _ := store.Stat(ctx, owner); got == nil || got.Annotations[mark] != "no" {
		t.Errorf("the new blob was marked: %+v", got)
	}
}

// countingStore is a store of blobs whose client counts its calls.
func countingStore(t *testing.T) (*calls, Store) {
	c := &calls{}
	return c, Store{Client: c.client(t), Layout: blobs}
}

// mustWrite writes b as owner's blob through s, failing the test on an
// error, and returns its digest.
func mustWrite(t *testing.T, s Store, owner *v1alpha1.Terraform, b Blob) digest.Digest {
	t.Helper()
	d, err := s.Write(context.Background(), owner, b)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Delete removes every chunk of the owner's blob of its layout, chunks
// left by a write cut short included, and nothing else: not a neighbour
// whose name shares a prefix, nor the same owner's blob of another layout.
func TestDelete(t *testing.T) {
	ctx := context.Background()
	owner := env.Owner(t, "del")
	neighbour := env.Terraform(t, owner.Namespace, "del-1")
	store := Store{Client: env.Client, Layout: blobs}
	for _, o := range []*v1alpha1.Terraform{owner, neighbour} {
		mustWrite(t, store, o, Blob{Data: testenv.RandomBytes(t, 2*ChunkSize)})
	}
	mustWrite(t, Store{Client: env.Client, Layout: hexBlobs}, owner, Blob{Data: []byte("hex")})
	// A write of 5 chunks cut short before its index: the index names 2.
	var c calls
	c.failApply = func(name string) bool { return name == "tfblob-del-0" }
	if _, err := (Store{Client: c.client(t), Layout: blobs}).Write(ctx, owner, Blob{Data: testenv.RandomBytes(t, 4*ChunkSize+1)}); err == nil {
		t.Fatal("the write with its index refused succeeded")
	}
	if n := len(secrets(t, blobs, owner)); n != 5 {
		t.Fatalf("%d chunks after the write cut short, want 5", n)
	}
	if _, err := store.Read(ctx, owner, ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("Read of a torn set = %v, want ErrNotFound", err)
	}

	if err := store.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	if n := names(secrets(t, blobs, owner)); len(n) != 0 {
		t.Errorf("left after Delete: %v", n)
	}
	if _, err := store.Read(ctx, owner, ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("Read after Delete = %v, want ErrNotFound", err)
	}
	if _, err := store.Read(ctx, neighbour, ""); err != nil {
		t.Errorf("the neighbour's blob was damaged: %v", err)
	}
	if _, err := (Store{Client: env.Client, Layout: hexBlobs}).Read(ctx, owner, ""); err != nil {
		t.Errorf("the blob of another layout was damaged: %v", err)
	}
	if err := store.Delete(ctx, owner); err != nil {
		t.Errorf("Delete of nothing = %v", err)
	}
}

// Owner names up to the longest a Terraform object may have give valid,
// distinct Secret names.
func TestLongOwnerName(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	store := Store{Client: env.Client, Layout: blobs}
	long := strings.Repeat("a", 253)
	for _, name := range []string{long, long[:250] + "bcd"} {
		owner := env.Terraform(t, ns, name)
		data := testenv.RandomBytes(t, ChunkSize+1)
		mustWrite(t, store, owner, Blob{Data: data})
		if b, err := store.Read(ctx, owner, ""); err != nil || !bytes.Equal(b.Data, data) {
			t.Errorf("Read = %v", err)
		}
		if n := len(secrets(t, blobs, owner)); n != 2 {
			t.Errorf("%d chunks for %d bytes", n, len(data))
		}
	}
	if blobs.ChunkName(long, 0) == blobs.ChunkName(long[:250]+"bcd", 0) {
		t.Error("two long names share a chunk name")
	}
	if _, ok := blobs.ChunkIndex("app", "tfhex-app-0"); ok {
		t.Error("a chunk of another layout taken for one of this")
	}
}

// A Secret under one of owner's chunk names that owner does not own (the
// state Secret the engine's backend named so, another object's Secret)
// is never read as owner's blob, written over or deleted.
func TestASecretNotOwnedIsLeftAlone(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	owner := env.Terraform(t, ns, "app")
	store := Store{Client: env.Client, Layout: blobs}
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: blobs.ChunkName(owner.Name, 0),
		Labels:      map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue, v1alpha1.OwnerNameLabel: owner.Name},
		Annotations: map[string]string{blobs.DigestAnnotation: "sha256:00", blobs.ChunksAnnotation: "1"}},
		Data: map[string][]byte{blobs.DataKey: []byte("someone else's")}}
	if err := env.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Stat(ctx, owner); !errors.Is(err, ErrNotFound) {
		t.Errorf("Stat: %v, want ErrNotFound", err)
	}
	if _, err := store.Read(ctx, owner, ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("Read: %v, want ErrNotFound", err)
	}
	var notOwned *NotOwnedError
	if _, err := store.Write(ctx, owner, Blob{Data: []byte("mine")}); !errors.As(err, &notOwned) {
		t.Errorf("Write: %v, want a NotOwnedError", err)
	}
	if err := store.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	got := secrets(t, blobs, owner)
	if s, ok := got[foreign.Name]; !ok || string(s.Data[blobs.DataKey]) != "someone else's" {
		t.Fatalf("the Secret not owned was changed or deleted: %v", names(got))
	}
}
