package source

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/tar"
)

// cacheEntries lists what the cache holds for digests of algorithm sha256.
func cacheEntries(t *testing.T, f *Fetcher) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(f.Dir, "sha256"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// An artifact whose tarball is larger than the download bound fails at
// once, whether the server declares its length or not, is not retried,
// and leaves nothing in the cache.
func TestFetchDownloadSizeBound(t *testing.T) {
	noise := make([]byte, 64<<10)
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	body := tarball(t, entry{name: "main.tf", content: string(noise)}) // incompressible
	cases := []struct {
		name     string
		limit    int64
		stall    bool // declare the length, send half, then wait
		noLength bool
		tooLarge bool
	}{
		// Half the body is within the bound: only the Content-Length can
		// refuse it before the download times out.
		{name: "Content-Length over the bound", limit: int64(len(body)) * 3 / 4, stall: true, tooLarge: true},
		{name: "body over the bound", limit: int64(len(body)) * 3 / 4, noLength: true, tooLarge: true},
		{name: "body at the bound", limit: int64(len(body)), noLength: true},
		{name: "Content-Length at the bound", limit: int64(len(body))},
		{name: "no bound", limit: -1, noLength: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newArtifactServer(t)
			srv.noLength = tc.noLength
			if tc.stall {
				srv.stall = make(chan struct{})
				t.Cleanup(func() { close(srv.stall) })
			}
			a := srv.serve("/a.tar.gz", body, "")
			f := newTestFetcher(t)
			f.DownloadTimeout = 5 * time.Second
			f.Limits.Download = tc.limit

			_, dir, err := f.Fetch(context.Background(), a)
			if !tc.tooLarge {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(filepath.Join(dir, "main.tf")); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrArtifactTooLarge) {
				t.Fatalf("got %v, want ErrArtifactTooLarge", err)
			}
			for _, want := range []string{"GitRepository flux-system/infra", strconv.FormatInt(tc.limit, 10) + " bytes", "--artifact-download-max-size"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not say %q: %v", want, err)
				}
			}
			if n := srv.requests.Load(); n != 1 {
				t.Errorf("an artifact over the bound was downloaded %d times, want once", n)
			}
			if names := cacheEntries(t, f); len(names) != 0 {
				t.Errorf("cache holds %v after a refused download, want nothing", names)
			}
		})
	}
}

// A small gzip that expands past the extraction bound fails, through
// Fetch and through Restore (a kept artifact), and leaves no tree, partial
// or whole, in the cache.
func TestFetchExtractedSizeBound(t *testing.T) {
	const limit = 1 << 20
	zeros := func(n int) string { return strings.Repeat("\x00", n) }
	cases := []struct {
		name     string
		entries  []entry
		tooLarge bool
	}{
		{name: "one file over the bound", entries: []entry{{name: "main.tf", content: zeros(8 << 20)}}, tooLarge: true},
		// The first two files are extracted before the third is refused.
		{name: "files past the bound", entries: []entry{
			{name: "a/main.tf", content: zeros(limit / 2)},
			{name: "b/main.tf", content: zeros(limit / 2)},
			{name: "c/main.tf", content: "x"},
		}, tooLarge: true},
		{name: "files at the bound", entries: []entry{
			{name: "a/main.tf", content: zeros(limit / 2)},
			{name: "b/main.tf", content: zeros(limit / 2)},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := tarball(t, tc.entries...)
			if len(body) > 64<<10 {
				t.Fatalf("the test's tarball is %d bytes; it should be a small gzip", len(body))
			}
			srv := newArtifactServer(t)
			a := srv.serve("/a.tar.gz", body, "")
			f := newTestFetcher(t)
			f.Limits.Extracted = limit

			_, _, err := f.Fetch(context.Background(), a)
			if !tc.tooLarge {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrArtifactTooLarge) {
				t.Fatalf("got %v, want ErrArtifactTooLarge", err)
			}
			for _, want := range []string{"GitRepository flux-system/infra", "1 MiB", "--artifact-extracted-max-size"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not say %q: %v", want, err)
				}
			}
			// The verified tarball may stay (Prune removes it); no tree may.
			hex := strings.TrimPrefix(a.Digest, "sha256:")
			if names := cacheEntries(t, f); len(names) != 1 || names[0] != hex+".tar.gz" {
				t.Errorf("cache holds %v after a refused extraction, want only %s.tar.gz", names, hex)
			}
			// Again, from the tarball already cached: refused the same way.
			if _, _, err := f.Fetch(context.Background(), a); !errors.Is(err, ErrArtifactTooLarge) {
				t.Errorf("second fetch: got %v, want ErrArtifactTooLarge", err)
			}

			kept := newTestFetcher(t)
			kept.Limits.Extracted = limit
			if _, _, err := kept.Restore(context.Background(), a.Digest, body); !errors.Is(err, ErrArtifactTooLarge) {
				t.Errorf("restore: got %v, want ErrArtifactTooLarge", err)
			}
			if names := cacheEntries(t, kept); len(names) != 1 || names[0] != hex+".tar.gz" {
				t.Errorf("cache holds %v after a refused restore, want only %s.tar.gz", names, hex)
			}
		})
	}
}

func TestSizeLimitsDefaults(t *testing.T) {
	cases := []struct {
		limits              SizeLimits
		download, extracted int64
		untar               int
	}{
		{limits: SizeLimits{}, download: DefaultMaxDownloadSize, extracted: DefaultMaxExtractedSize, untar: int(DefaultMaxExtractedSize)},
		{limits: SizeLimits{Download: -1, Extracted: -5}, download: -1, extracted: -1, untar: tar.UnlimitedUntarSize},
		{limits: SizeLimits{Download: 10, Extracted: 20}, download: 10, extracted: 20, untar: 20},
	}
	for _, tc := range cases {
		if got := tc.limits.download(); got != tc.download {
			t.Errorf("%+v: download bound %d, want %d", tc.limits, got, tc.download)
		}
		if got := tc.limits.extracted(); got != tc.extracted {
			t.Errorf("%+v: extracted bound %d, want %d", tc.limits, got, tc.extracted)
		}
		if got := tc.limits.untarLimit(); got != tc.untar {
			t.Errorf("%+v: untar limit %d, want %d", tc.limits, got, tc.untar)
		}
	}
}
