package source

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func newTestFetcher(t *testing.T) *Fetcher {
	f := NewFetcher(t.TempDir())
	f.RetryWait = time.Millisecond
	return f
}

func TestFetchVerifiesAndExtracts(t *testing.T) {
	srv := newArtifactServer(t)
	body := tarball(t,
		entry{name: "main.tf", content: `output "x" { value = 1 }`},
		entry{name: "modules/db/main.tf", content: "# db"},
	)
	a := srv.serve("/gitrepository/flux-system/infra/abc.tar.gz", body, "")
	f := newTestFetcher(t)

	tb, dir, err := f.Fetch(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(tb)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("cached tarball differs from the served one (err %v)", err)
	}
	for name, want := range map[string]string{"main.tf": `output "x" { value = 1 }`, "modules/db/main.tf": "# db"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q (err %v), want %q", name, b, err, want)
		}
	}
	hex := strings.TrimPrefix(a.Digest, "sha256:")
	if tb != filepath.Join(f.Dir, "sha256", hex+".tar.gz") || dir != filepath.Join(f.Dir, "sha256", hex) {
		t.Errorf("unexpected cache paths %s, %s", tb, dir)
	}
}

func TestFetchDigestMismatchCachesNothing(t *testing.T) {
	srv := newArtifactServer(t)
	body := tarball(t, entry{name: "main.tf", content: "x"})
	wrong := sha([]byte("something else"))
	a := srv.serve("/a.tar.gz", body, wrong)
	f := newTestFetcher(t)

	_, _, err := f.Fetch(context.Background(), a)
	if !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("got %v, want ErrDigestMismatch", err)
	}
	if !strings.Contains(err.Error(), "GitRepository flux-system/infra") {
		t.Errorf("error does not name the source: %v", err)
	}
	if n := srv.requests.Load(); n != 1 {
		t.Errorf("a digest mismatch was retried: %d requests", n)
	}
	entries, _ := os.ReadDir(filepath.Join(f.Dir, "sha256"))
	if len(entries) != 0 {
		t.Errorf("cache holds %d entries after a mismatch, want none: %v", len(entries), entries)
	}
	// A second attempt downloads again rather than trusting anything left.
	if _, _, err := f.Fetch(context.Background(), a); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("second fetch: got %v, want ErrDigestMismatch", err)
	}
	if n := srv.requests.Load(); n != 2 {
		t.Errorf("second fetch made %d requests in total, want 2", n)
	}
}

func TestFetchCachedByDigest(t *testing.T) {
	srv := newArtifactServer(t)
	body := tarball(t, entry{name: "main.tf", content: "x"})
	a := srv.serve("/a.tar.gz", body, "")
	f := newTestFetcher(t)

	tb1, dir1, err := f.Fetch(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	// Another object on the same source revision, and a restarted controller.
	b := a
	b.Name = "other"
	tb2, dir2, err := f.Fetch(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	restarted := newTestFetcher(t)
	restarted.Dir = f.Dir
	if _, _, err := restarted.Fetch(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if n := srv.requests.Load(); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
	if tb1 != tb2 || dir1 != dir2 {
		t.Errorf("same digest, different paths: %s %s / %s %s", tb1, dir1, tb2, dir2)
	}
}

func TestFetchConcurrentOneDownload(t *testing.T) {
	srv := newArtifactServer(t)
	srv.gate = make(chan struct{})
	a := srv.serve("/a.tar.gz", tarball(t, entry{name: "main.tf", content: "x"}), "")
	f := newTestFetcher(t)

	const callers = 8
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	dirs := make(chan string, callers)
	for range callers {
		wg.Go(func() {
			_, dir, err := f.Fetch(context.Background(), a)
			errs <- err
			dirs <- dir
		})
	}
	// Let every caller reach the lock before the one download completes.
	time.Sleep(100 * time.Millisecond)
	close(srv.gate)
	wg.Wait()
	close(errs)
	close(dirs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	first := ""
	for d := range dirs {
		if first == "" {
			first = d
		} else if d != first {
			t.Errorf("callers got different dirs: %s, %s", first, d)
		}
	}
	if n := srv.requests.Load(); n != 1 {
		t.Errorf("%d concurrent fetches made %d downloads, want 1", callers, n)
	}
}

func TestFetchRetries(t *testing.T) {
	tests := []struct {
		name         string
		fail         func(n int32) int
		wantErr      bool
		wantRequests int32
	}{
		{"transient 503 then ok", func(n int32) int {
			if n <= 2 {
				return http.StatusServiceUnavailable
			}
			return 0
		}, false, 3},
		{"429 is transient", func(n int32) int {
			if n == 1 {
				return http.StatusTooManyRequests
			}
			return 0
		}, false, 2},
		{"gives up after retries", func(int32) int { return http.StatusBadGateway }, true, 4},
		{"404 is not retried", func(int32) int { return http.StatusNotFound }, true, 1},
		{"403 is not retried", func(int32) int { return http.StatusForbidden }, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newArtifactServer(t)
			srv.fail = tt.fail
			a := srv.serve("/a.tar.gz", tarball(t, entry{name: "main.tf", content: "x"}), "")
			_, _, err := newTestFetcher(t).Fetch(context.Background(), a)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if n := srv.requests.Load(); n != tt.wantRequests {
				t.Errorf("%d requests, want %d", n, tt.wantRequests)
			}
		})
	}
}

// unavailable is a server that answers every request with 503, an
// artifact on it, and a fetcher that backs off for an hour between tries.
func unavailable(t *testing.T) (*artifactServer, Artifact, *Fetcher) {
	srv := newArtifactServer(t)
	srv.fail = func(int32) int { return http.StatusServiceUnavailable }
	a := srv.serve("/a.tar.gz", tarball(t, entry{name: "main.tf", content: "x"}), "")
	f := newTestFetcher(t)
	f.RetryWait = time.Hour
	return srv, a, f
}

func TestFetchHonoursContextDuringBackoff(t *testing.T) {
	_, a, f := unavailable(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := f.Fetch(ctx, a)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want context.DeadlineExceeded", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("Fetch waited %s despite the context", time.Since(start))
	}
	if strings.Contains(err.Error(), "did not finish within") {
		t.Errorf("the caller's own deadline is reported as the download timeout: %v", err)
	}
}

// A stalled server must not hold the digest's lock for longer than
// DownloadTimeout, even for a caller whose context has no deadline.
func TestFetchDownloadTimeoutReleasesLock(t *testing.T) {
	body := tarball(t, entry{name: "main.tf", content: "x"})
	stalled := newArtifactServer(t)
	stalled.stall = make(chan struct{})
	t.Cleanup(func() { close(stalled.stall) })
	a := stalled.serve("/a.tar.gz", body, "")
	good := newArtifactServer(t)
	b := good.serve("/a.tar.gz", body, "") // same digest, served properly
	f := newTestFetcher(t)
	f.DownloadTimeout = time.Second

	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, _, err := f.Fetch(context.Background(), a)
		done <- err
	}()
	eventually(t, "the stalled download has started", func() bool { return stalled.requests.Load() == 1 })

	// A waiter for the lock honours its own context.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, _, err := f.Fetch(ctx, b); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiter: got %v, want context.DeadlineExceeded", err)
	}
	if n := good.requests.Load(); n != 0 {
		t.Fatalf("the waiter downloaded while the lock was held (%d requests)", n)
	}

	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Fetch against a stalled server did not give up")
	}
	if elapsed := time.Since(start); elapsed < time.Second || elapsed > 5*time.Second {
		t.Errorf("Fetch gave up after %s, want about the 1s DownloadTimeout", elapsed)
	}
	if !errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), "did not finish within 1s") ||
		!strings.Contains(err.Error(), "GitRepository flux-system/infra") {
		t.Fatalf("got %v, want a deadline error naming the source and the timeout", err)
	}

	// The lock is free: the same digest from a good server comes at once.
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start = time.Now()
	tb, dir, err := f.Fetch(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("Fetch after the timeout took %s", elapsed)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "main.tf")); err != nil || string(got) != "x" {
		t.Errorf("main.tf = %q (err %v), want %q", got, err, "x")
	}
	// The partial download left nothing behind.
	entries, err := os.ReadDir(filepath.Dir(tb))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{filepath.Base(dir), filepath.Base(tb)}; !slices.Equal(names, want) {
		t.Errorf("cache holds %v, want %v", names, want)
	}
}

// The deadline covers the retries too.
func TestFetchDownloadTimeoutCoversRetries(t *testing.T) {
	srv, a, f := unavailable(t)
	f.DownloadTimeout = 200 * time.Millisecond

	done := make(chan error, 1)
	go func() {
		_, _, err := f.Fetch(context.Background(), a)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "did not finish within 200ms") {
			t.Fatalf("got %v, want the download deadline", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the backoff outlived DownloadTimeout")
	}
	if n := srv.requests.Load(); n != 1 {
		t.Errorf("%d requests, want 1 before the deadline", n)
	}
}

func TestFetchRejectsBadArtifact(t *testing.T) {
	tests := []struct {
		name string
		a    Artifact
		want string
	}{
		{"no digest", Artifact{Kind: "Bucket", Namespace: "ns", Name: "b", URL: "http://x/a.tar.gz"}, "invalid digest"},
		{"malformed digest", Artifact{Kind: "Bucket", Namespace: "ns", Name: "b", Digest: "sha256:../../etc", URL: "http://x/a"}, "invalid digest"},
		{"no URL", Artifact{Kind: "Bucket", Namespace: "ns", Name: "b", Digest: sha([]byte("x"))}, "no URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := newTestFetcher(t).Fetch(context.Background(), tt.a)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "Bucket ns/b") {
				t.Errorf("got %v, want an error naming Bucket ns/b and containing %q", err, tt.want)
			}
		})
	}
}

func TestFetchSkipsSymlinksInTarball(t *testing.T) {
	srv := newArtifactServer(t)
	a := srv.serve("/a.tar.gz", tarball(t,
		entry{name: "modules/db/main.tf", content: "# db"},
		entry{name: "escape", link: "/etc"},
		entry{name: "modules/up", link: "../../.."},
	), "")
	_, dir, err := newTestFetcher(t).Fetch(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"escape", "modules/up"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); !os.IsNotExist(err) {
			t.Errorf("symlink %s was extracted (lstat err %v)", p, err)
		}
		if _, _, err := ModulePath(dir, p); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("ModulePath(%q) = %v, want ErrInvalidPath", p, err)
		}
	}
	if _, _, err := ModulePath(dir, "modules/db"); err != nil {
		t.Errorf("ModulePath(modules/db): %v", err)
	}
}
