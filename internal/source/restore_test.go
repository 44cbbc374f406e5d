package source

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A kept artifact put back into the cache is what Fetch would have
// returned: Cached finds it, and Fetch serves it without a download.
func TestRestoreThenCachedAndFetch(t *testing.T) {
	ctx := context.Background()
	data := tarball(t, entry{name: "modules/app/main.tf", content: "# app"}, entry{name: "modules/shared/x.tf", content: "# shared"})
	f := NewFetcher(t.TempDir())

	if _, _, ok, err := f.Cached(ctx, sha(data)); err != nil || ok {
		t.Fatalf("Cached on an empty cache = %t, %v; want a miss", ok, err)
	}
	tb, dir, err := f.Restore(ctx, sha(data), data)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "modules", "shared", "x.tf")); err != nil || string(b) != "# shared" {
		t.Fatalf("extracted tree: %q, %v", b, err)
	}
	ctb, cdir, ok, err := f.Cached(ctx, sha(data))
	if err != nil || !ok || ctb != tb || cdir != dir {
		t.Fatalf("Cached = %q, %q, %t, %v; want %q, %q", ctb, cdir, ok, err, tb, dir)
	}

	srv := newArtifactServer(t)
	a := srv.serve("/a.tar.gz", data, "")
	ftb, fdir, err := f.Fetch(ctx, a)
	if err != nil || ftb != tb || fdir != dir {
		t.Fatalf("Fetch = %q, %q, %v; want the restored paths", ftb, fdir, err)
	}
	if n := srv.requests.Load(); n != 0 {
		t.Errorf("Fetch downloaded %d times; the restored artifact should serve it", n)
	}

	// The tree is extracted again from the tarball when it went missing.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, cdir, ok, err := f.Cached(ctx, sha(data)); err != nil || !ok {
		t.Fatalf("Cached without the tree = %t, %v", ok, err)
	} else if _, err := os.Stat(filepath.Join(cdir, "modules", "app", "main.tf")); err != nil {
		t.Errorf("tree not extracted again: %v", err)
	}
}

// Bytes that are not the named artifact never enter the cache.
func TestRestoreDigestMismatchCachesNothing(t *testing.T) {
	ctx := context.Background()
	data := tarball(t, entry{name: "main.tf", content: "# a"})
	other := tarball(t, entry{name: "main.tf", content: "# b"})
	f := NewFetcher(t.TempDir())

	if _, _, err := f.Restore(ctx, sha(other), data); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("Restore = %v, want ErrDigestMismatch", err)
	}
	if _, _, ok, err := f.Cached(ctx, sha(other)); err != nil || ok {
		t.Errorf("Cached after a refused Restore = %t, %v; want a miss", ok, err)
	}
	entries, _ := os.ReadDir(filepath.Join(f.Dir, "sha256"))
	if len(entries) != 0 {
		t.Errorf("cache holds %d entries after a refused Restore", len(entries))
	}
	if _, _, err := f.Restore(ctx, "sha256:nothex", data); err == nil {
		t.Error("Restore accepted an invalid digest")
	}
}
