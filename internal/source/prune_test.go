package source

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// cachedArtifact is an artifact fetched into a test's cache.
type cachedArtifact struct {
	Artifact
	tarball, dir string
	size         int64 // tarball plus extracted files, counted by the test
}

// fetchUsedAt serves one file of size bytes as an artifact, fetches it and
// makes its last use at used.
func fetchUsedAt(t *testing.T, f *Fetcher, srv *artifactServer, name string, size int, used time.Time) cachedArtifact {
	t.Helper()
	content := strings.Repeat(name, size/len(name)+1)[:size]
	a := srv.serve("/"+name+".tar.gz", tarball(t, entry{name: name + ".tf", content: content}), "")
	tb, dir, err := f.Fetch(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	setUse(t, tb, used)
	fi, err := os.Stat(tb)
	if err != nil {
		t.Fatal(err)
	}
	return cachedArtifact{Artifact: a, tarball: tb, dir: dir, size: fi.Size() + int64(size)}
}

func setUse(t *testing.T, path string, used time.Time) {
	t.Helper()
	if err := os.Chtimes(path, used, used); err != nil {
		t.Fatal(err)
	}
}

func assertCached(t *testing.T, a cachedArtifact, want bool) {
	t.Helper()
	for _, p := range []string{a.tarball, a.dir} {
		_, err := os.Stat(p)
		switch {
		case want && err != nil:
			t.Errorf("%s was removed: %v", p, err)
		case !want && !os.IsNotExist(err):
			t.Errorf("%s survived the prune (err %v)", p, err)
		}
	}
}

func TestPruneByAge(t *testing.T) {
	srv := newArtifactServer(t)
	f := newTestFetcher(t)
	past := time.Now().Add(-2 * time.Hour)
	old := fetchUsedAt(t, f, srv, "old", 100, past)
	recent := fetchUsedAt(t, f, srv, "new", 200, time.Now())
	// Leftovers of a download interrupted by a crash, under today's name
	// and under the one older versions used.
	hex := strings.TrimPrefix(recent.Digest, "sha256:")
	var leftovers []string
	for _, name := range []string{tmpPrefix + hex + "-123.tar.gz", tmpPrefix + "456.tar.gz"} {
		p := filepath.Join(f.Dir, "sha256", name)
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
		setUse(t, p, past)
		leftovers = append(leftovers, p)
	}

	res, err := f.Prune(PruneOptions{MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	assertCached(t, old, false)
	assertCached(t, recent, true)
	for _, p := range leftovers {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("leftover %s survived the prune (err %v)", p, err)
		}
	}
	want := PruneResult{Removed: 1, FreedBytes: old.size + 2*int64(len("partial")), RemainingBytes: recent.size}
	if res != want {
		t.Errorf("Prune = %+v, want %+v", res, want)
	}

	// A pruned artifact is downloaded again.
	if _, _, err := f.Fetch(context.Background(), old.Artifact); err != nil {
		t.Fatal(err)
	}
	if n := srv.requests.Load(); n != 3 {
		t.Errorf("%d requests, want 3 (two fetches and one after the prune)", n)
	}
}

func TestPruneBySizeRemovesLeastRecentlyUsed(t *testing.T) {
	now := time.Now()
	// By last use: a (5h ago), c (4h), b (3h); sizes differ so that the
	// bytes say which ones went.
	setup := func(t *testing.T) (*Fetcher, map[string]cachedArtifact) {
		srv := newArtifactServer(t)
		f := newTestFetcher(t)
		return f, map[string]cachedArtifact{
			"a": fetchUsedAt(t, f, srv, "a", 1000, now.Add(-5*time.Hour)),
			"b": fetchUsedAt(t, f, srv, "b", 3000, now.Add(-3*time.Hour)),
			"c": fetchUsedAt(t, f, srv, "c", 2000, now.Add(-4*time.Hour)),
		}
	}
	tests := []struct {
		name        string
		maxSize     func(s map[string]int64) int64
		wantRemoved []string
	}{
		{"under the bound", func(s map[string]int64) int64 { return s["a"] + s["b"] + s["c"] }, nil},
		{"one byte over", func(s map[string]int64) int64 { return s["a"] + s["b"] + s["c"] - 1 }, []string{"a"}},
		{"stops once at the bound", func(s map[string]int64) int64 { return s["b"] + s["c"] }, []string{"a"}},
		{"two oldest", func(s map[string]int64) int64 { return s["b"] }, []string{"a", "c"}},
		{"all", func(map[string]int64) int64 { return 1 }, []string{"a", "b", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, arts := setup(t)
			sizes := map[string]int64{}
			for k, a := range arts {
				sizes[k] = a.size
			}
			res, err := f.Prune(PruneOptions{MaxSize: tt.maxSize(sizes)})
			if err != nil {
				t.Fatal(err)
			}
			var want PruneResult
			for k, a := range arts {
				removed := slices.Contains(tt.wantRemoved, k)
				assertCached(t, a, !removed)
				if removed {
					want.Removed++
					want.FreedBytes += a.size
				} else {
					want.RemainingBytes += a.size
				}
			}
			if res != want {
				t.Errorf("Prune = %+v, want %+v", res, want)
			}
		})
	}
}

// Fetch records each use, so an artifact fetched again is no longer the
// least recently used.
func TestFetchHitRecordsUse(t *testing.T) {
	srv := newArtifactServer(t)
	f := newTestFetcher(t)
	now := time.Now()
	a := fetchUsedAt(t, f, srv, "a", 100, now.Add(-3*time.Hour))
	b := fetchUsedAt(t, f, srv, "b", 100, now.Add(-2*time.Hour))
	c := fetchUsedAt(t, f, srv, "c", 100, now.Add(-1*time.Hour))
	if _, _, err := f.Fetch(context.Background(), a.Artifact); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)

	res, err := f.Prune(PruneOptions{MaxAge: 90 * time.Minute, MaxSize: a.size, MinAge: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	assertCached(t, a, true)
	assertCached(t, b, false)
	assertCached(t, c, false)
	if want := (PruneResult{Removed: 2, FreedBytes: b.size + c.size, RemainingBytes: a.size}); res != want {
		t.Errorf("Prune = %+v, want %+v", res, want)
	}
	if n := srv.requests.Load(); n != 3 {
		t.Errorf("%d requests, want 3: the second fetch of a is a cache hit", n)
	}
}

func TestPruneSparesLockedDigest(t *testing.T) {
	srv := newArtifactServer(t)
	f := newTestFetcher(t)
	a := fetchUsedAt(t, f, srv, "a", 100, time.Now().Add(-5*time.Hour))
	opts := PruneOptions{MaxAge: time.Hour, MaxSize: 1}

	// A Fetch of the digest is in progress.
	unlock, err := f.locks.lock(context.Background(), a.Digest)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.Prune(opts)
	if err != nil {
		t.Fatal(err)
	}
	assertCached(t, a, true)
	if want := (PruneResult{RemainingBytes: a.size}); res != want {
		t.Errorf("Prune while locked = %+v, want %+v", res, want)
	}

	// The same prune removes it once the lock is free, so the lock is what
	// spared it.
	unlock()
	if res, err = f.Prune(opts); err != nil {
		t.Fatal(err)
	}
	assertCached(t, a, false)
	if want := (PruneResult{Removed: 1, FreedBytes: a.size}); res != want {
		t.Errorf("Prune after unlock = %+v, want %+v", res, want)
	}
}

func TestPruneSparesDownloadInFlight(t *testing.T) {
	srv := newArtifactServer(t)
	srv.stall = make(chan struct{})
	t.Cleanup(func() { close(srv.stall) })
	body := tarball(t, entry{name: "main.tf", content: strings.Repeat("x", 10000)})
	a := srv.serve("/a.tar.gz", body, "")
	f := newTestFetcher(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := f.Fetch(ctx, a)
		done <- err
	}()
	defer func() { cancel(); <-done }()

	var partial string
	eventually(t, "the partial download is on disk", func() bool {
		m, _ := filepath.Glob(filepath.Join(f.Dir, "sha256", tmpPrefix+"*"))
		if len(m) == 1 {
			fi, err := os.Stat(m[0])
			if err == nil && fi.Size() == int64(len(body)/2) {
				partial = m[0]
				return true
			}
		}
		return false
	})
	// Old enough to be taken for a crash's leftover.
	setUse(t, partial, time.Now().Add(-5*time.Hour))

	res, err := f.Prune(PruneOptions{MaxAge: time.Hour, MaxSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(partial); err != nil {
		t.Errorf("the download in flight lost its file: %v", err)
	}
	if want := (PruneResult{RemainingBytes: int64(len(body) / 2)}); res != want {
		t.Errorf("Prune = %+v, want %+v", res, want)
	}
}

func TestPruneMinAgeSparesJustFetched(t *testing.T) {
	srv := newArtifactServer(t)
	f := newTestFetcher(t)
	old := fetchUsedAt(t, f, srv, "old", 100, time.Now().Add(-2*time.Hour))
	// Just returned by Fetch: its caller may be reading the tree right now.
	justTB, justDir, err := f.Fetch(context.Background(), srv.serve("/just.tar.gz",
		tarball(t, entry{name: "just.tf", content: "just"}), ""))
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(justTB)
	if err != nil {
		t.Fatal(err)
	}
	just := cachedArtifact{tarball: justTB, dir: justDir, size: fi.Size() + int64(len("just"))}

	// The default MinAge (an hour) beats both bounds.
	res, err := f.Prune(PruneOptions{MaxAge: time.Nanosecond, MaxSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	assertCached(t, old, false)
	assertCached(t, just, true)
	if want := (PruneResult{Removed: 1, FreedBytes: old.size, RemainingBytes: just.size}); res != want {
		t.Errorf("Prune = %+v, want %+v", res, want)
	}

	// A shorter MinAge lets an artifact used 30 minutes ago go.
	setUse(t, justTB, time.Now().Add(-30*time.Minute))
	if res, err = f.Prune(PruneOptions{MaxSize: 1, MinAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	assertCached(t, just, true)
	if res, err = f.Prune(PruneOptions{MaxSize: 1, MinAge: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	assertCached(t, just, false)
	if want := (PruneResult{Removed: 1, FreedBytes: just.size}); res != want {
		t.Errorf("Prune with MinAge 10m = %+v, want %+v", res, want)
	}
}

func TestPruneEmptyCache(t *testing.T) {
	f := NewFetcher(filepath.Join(t.TempDir(), "not-yet"))
	res, err := f.Prune(PruneOptions{MaxAge: time.Hour, MaxSize: 1})
	if err != nil || res != (PruneResult{}) {
		t.Errorf("Prune of a missing cache = %+v, %v", res, err)
	}
}
