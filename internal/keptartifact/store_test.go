package keptartifact

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/chunkstore"
	"github.com/landform-dev/landform/internal/testenv"
)

func randomArtifact(t *testing.T, n int) ([]byte, string) {
	t.Helper()
	b := testenv.RandomBytes(t, n)
	sum := sha256.Sum256(b)
	return b, "sha256:" + hex.EncodeToString(sum[:])
}

// keptSecrets lists the Secrets holding owner's kept artifact, by name.
func keptSecrets(t *testing.T, owner *v1alpha1.Terraform) map[string]corev1.Secret {
	t.Helper()
	return env.Secrets(t, owner.Namespace, func(name string) bool { return strings.HasPrefix(name, "tfartifact-"+owner.Name+"-") })
}

func names(m map[string]corev1.Secret) []string { return slices.Sorted(maps.Keys(m)) }

// An artifact of several chunks comes back byte for byte, in Secrets owned
// by and labelled for the object; a smaller one replaces it entirely.
func TestSaveLoadReplaceDelete(t *testing.T) {
	ctx := context.Background()
	owner := env.Owner(t, "app")
	s := Store{Client: env.Client}

	big, bigDigest := randomArtifact(t, 3*chunkstore.ChunkSize+123)
	if err := s.Save(ctx, owner, "main@sha1:1", bigDigest, big); err != nil {
		t.Fatal(err)
	}
	secrets := keptSecrets(t, owner)
	if got := names(secrets); len(got) != 4 {
		t.Fatalf("secrets %v, want 4 chunks", got)
	}
	for name, sec := range secrets {
		if sec.Type != SecretType {
			t.Errorf("%s: type %q", name, sec.Type)
		}
		if sec.Labels[v1alpha1.ManagedByLabel] != v1alpha1.ManagedByValue || sec.Labels[v1alpha1.OwnerNameLabel] != "app" || sec.Labels[ArtifactLabel] != "true" {
			t.Errorf("%s: labels %v", name, sec.Labels)
		}
		if len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].UID != owner.UID || sec.OwnerReferences[0].Controller == nil || !*sec.OwnerReferences[0].Controller {
			t.Errorf("%s: owner references %+v, want the Terraform object as controller", name, sec.OwnerReferences)
		}
	}
	got, err := s.Load(ctx, owner, bigDigest)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, big) {
		t.Fatalf("loaded %d bytes that differ from the %d kept", len(got), len(big))
	}
	if has, err := s.Has(ctx, owner, bigDigest); err != nil || !has {
		t.Errorf("Has = %t, %v; want true", has, err)
	}

	small, smallDigest := randomArtifact(t, 1000)
	if err := s.Save(ctx, owner, "main@sha1:2", smallDigest, small); err != nil {
		t.Fatal(err)
	}
	if got := names(keptSecrets(t, owner)); len(got) != 1 || got[0] != "tfartifact-app-0" {
		t.Errorf("after a smaller artifact: secrets %v, want only tfartifact-app-0", got)
	}
	if _, err := s.Load(ctx, owner, bigDigest); !errors.Is(err, ErrNotFound) {
		t.Errorf("loading the replaced artifact: %v, want ErrNotFound", err)
	}
	if has, _ := s.Has(ctx, owner, bigDigest); has {
		t.Error("Has names the replaced artifact")
	}
	if got, err := s.Load(ctx, owner, smallDigest); err != nil || !bytes.Equal(got, small) {
		t.Errorf("Load = %d bytes, %v; want the small artifact", len(got), err)
	}

	if err := s.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	if got := keptSecrets(t, owner); len(got) != 0 {
		t.Errorf("after Delete: %v", names(got))
	}
	if _, err := s.Load(ctx, owner, smallDigest); !errors.Is(err, ErrNotFound) {
		t.Errorf("Load after Delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, owner); err != nil {
		t.Errorf("Delete with nothing kept: %v", err)
	}
}

// Bytes that are not the named artifact are never kept, and kept bytes
// changed afterwards are never returned.
func TestDigestMismatchRefused(t *testing.T) {
	ctx := context.Background()
	owner := env.Owner(t, "app")
	s := Store{Client: env.Client}

	data, d := randomArtifact(t, chunkstore.ChunkSize+10)
	_, other := randomArtifact(t, 10)
	if err := s.Save(ctx, owner, "main@sha1:1", other, data); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("Save with another digest: %v, want ErrDigestMismatch", err)
	}
	if got := keptSecrets(t, owner); len(got) != 0 {
		t.Fatalf("a refused Save wrote %v", names(got))
	}

	if err := s.Save(ctx, owner, "main@sha1:1", d, data); err != nil {
		t.Fatal(err)
	}
	// Tamper with the second chunk, keeping its annotations.
	env.UpdateSecret(t, owner.Namespace, "tfartifact-app-1", func(s *corev1.Secret) { s.Data[dataKey][0] ^= 0xff })
	if got, err := s.Load(ctx, owner, d); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("Load of tampered bytes = %d bytes, %v; want ErrDigestMismatch", len(got), err)
	}
	// A chunk gone: the set is incomplete.
	env.DeleteSecret(t, owner.Namespace, "tfartifact-app-1")
	if _, err := s.Load(ctx, owner, d); !errors.Is(err, ErrNotFound) {
		t.Errorf("Load with a chunk missing: %v, want ErrNotFound", err)
	}
}

// Over the limit nothing is written; a negative limit keeps nothing.
func TestTooLargeIsNotKept(t *testing.T) {
	ctx := context.Background()
	owner := env.Owner(t, "app")

	data, d := randomArtifact(t, 2000)
	for _, s := range []Store{{Client: env.Client, MaxSize: 1999}, {Client: env.Client, MaxSize: -1}} {
		if err := s.Save(ctx, owner, "main@sha1:1", d, data); !errors.Is(err, ErrTooLarge) {
			t.Errorf("MaxSize %d: Save = %v, want ErrTooLarge", s.MaxSize, err)
		}
	}
	if got := keptSecrets(t, owner); len(got) != 0 {
		t.Fatalf("secrets %v written over the limit", names(got))
	}
	if err := (Store{Client: env.Client, MaxSize: 2000}).Save(ctx, owner, "main@sha1:1", d, data); err != nil {
		t.Errorf("at the limit: %v", err)
	}
	if got := (Store{}).Limit(); got != DefaultMaxSize {
		t.Errorf("default limit %d, want %d", got, DefaultMaxSize)
	}
}

// --kept-artifact-max-size=0 keeps no artifact, as a negative size does,
// though a Store's zero MaxSize is the default; a positive size is a bound
// and no size at all leaves the default.
func TestMaxSizeFlag(t *testing.T) {
	ctx := context.Background()
	owner := env.Owner(t, "app")
	data, d := randomArtifact(t, 2000)
	parse := func(args ...string) int64 {
		t.Helper()
		n := DefaultMaxSize
		fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
		fs.Var((*MaxSizeFlag)(&n), "kept-artifact-max-size", "")
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, arg := range []string{"0", "-1"} {
		s := Store{Client: env.Client, MaxSize: parse("--kept-artifact-max-size=" + arg)}
		if err := s.Save(ctx, owner, "main@sha1:1", d, data); !errors.Is(err, ErrTooLarge) {
			t.Errorf("--kept-artifact-max-size=%s: Save = %v, want ErrTooLarge", arg, err)
		}
	}
	if got := keptSecrets(t, owner); len(got) != 0 {
		t.Fatalf("secrets %v written with a size of 0 or less", names(got))
	}
	if got := (Store{MaxSize: parse("--kept-artifact-max-size=2000")}).Limit(); got != 2000 {
		t.Errorf("--kept-artifact-max-size=2000: limit %d", got)
	}
	if got := (Store{MaxSize: parse()}).Limit(); got != DefaultMaxSize {
		t.Errorf("no --kept-artifact-max-size: limit %d, want %d", got, DefaultMaxSize)
	}
	n := DefaultMaxSize
	if err := (*MaxSizeFlag)(&n).Set("4MiB"); err == nil {
		t.Error("Set(4MiB) took a unit it does not know")
	}
}

// Long object names still give valid, distinct Secret names.
func TestChunkNames(t *testing.T) {
	long := strings.Repeat("a", 253)
	for _, owner := range []string{"app", long, long[:250] + "bcd"} {
		for _, i := range []int{0, 7, 123456} {
			name := layout.ChunkName(owner, i)
			if len(name) > 253 {
				t.Errorf("%q: %d characters", name, len(name))
			}
			if got, ok := layout.ChunkIndex(owner, name); !ok || got != i {
				t.Errorf("layout.ChunkIndex(%q) = %d, %t; want %d", name, got, ok, i)
			}
		}
	}
	if layout.ChunkName(long, 0) == layout.ChunkName(long[:250]+"bcd", 0) {
		t.Error("two long names share a chunk name")
	}
	if _, ok := layout.ChunkIndex("app", "tfartifact-app-1-0"); ok {
		t.Error("a chunk of app-1 taken for one of app")
	}
	if _, ok := layout.ChunkIndex("app", "tfplan-app-0"); ok {
		t.Error("a plan chunk taken for an artifact chunk")
	}
}
