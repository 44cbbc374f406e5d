package source

import (
	"context"
	_ "crypto/sha256" // digest algorithms source-controller can be configured with
	_ "crypto/sha512"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/fluxcd/pkg/tar"
	"github.com/opencontainers/go-digest"
	_ "github.com/opencontainers/go-digest/blake3"
)

// Fetcher downloads artifacts and keeps them, verified and extracted, in a
// cache keyed by digest: every Terraform object on one source revision
// shares one download and one extracted tree, and a controller restart
// reuses the cache.
//
// Not fluxcd/pkg/http/fetch: Landform needs the verified tarball itself
// (streamed to runners, kept in Secrets for a destroy without its source,
// shared by every object on its digest), and fetch discards it after
// extraction or, without extraction, writes the target before verifying
// it. `make bench` measures what sharing buys: one download per digest for
// 20, 200 and 1000 objects on one source (docs/benchmarks.md, "artifact downloads").
// Extraction is fluxcd/pkg/tar's (symlinks skipped).
//
// Layout under Dir: <algorithm>/<hex>.tar.gz (the verified tarball) and
// <algorithm>/<hex>/ (its extracted tree). Both appear by an atomic rename,
// so their presence means they are complete. The tarball's mtime is the
// last time Fetch returned it; Prune removes by it.
type Fetcher struct {
	// Dir is the cache directory; created when needed.
	Dir string
	// HTTPClient downloads artifacts; http.DefaultClient when nil.
	HTTPClient *http.Client
	// Retries is how many times a transient failure (network error, 5xx,
	// 429) is retried.
	Retries int
	// RetryWait is the first wait between attempts; it doubles each time.
	RetryWait time.Duration
	// Host, when set, replaces the artifact URL's host, for a controller
	// that runs outside the cluster and reaches source-controller through a
	// port-forward.
	Host string
	// DownloadTimeout bounds one download, retries included, whatever the
	// caller's context: the download holds the digest's lock, and every
	// other Fetch of that digest waits for it. DefaultDownloadTimeout when
	// zero or negative.
	DownloadTimeout time.Duration
	// Limits bound each artifact's download and extracted files; the
	// defaults when zero.
	Limits SizeLimits

	locks keyedMutex
}

// DefaultDownloadTimeout is the download deadline of a Fetcher that sets none.
const DefaultDownloadTimeout = 5 * time.Minute

// NewFetcher returns a Fetcher caching under dir with three retries,
// DefaultDownloadTimeout and the default size limits.
func NewFetcher(dir string) *Fetcher {
	return &Fetcher{
		Dir:             dir,
		HTTPClient:      &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
		Retries:         3,
		RetryWait:       time.Second,
		DownloadTimeout: DefaultDownloadTimeout,
	}
}

// Fetch returns the path of a's verified tarball in the cache and the path of
// its extracted tree, downloading and extracting only when the cache does not
// hold them yet. Concurrent calls for one digest share a single download,
// which gives up after DownloadTimeout; a caller waiting for it stops
// waiting when its own ctx ends.
// The tarball is verified against a.Digest before it enters the cache or is
// extracted; a mismatch fails with ErrDigestMismatch and leaves nothing
// behind. An artifact over Limits fails with ErrArtifactTooLarge and leaves
// no tree behind (a tarball within the download bound stays, verified).
// Symlinks in the tarball are not extracted (source-controller does not put
// any in the artifacts it builds), so nothing in the tree can point outside
// it.
func (f *Fetcher) Fetch(ctx context.Context, a Artifact) (tarball, dir string, err error) {
	d, err := digest.Parse(a.Digest)
	if err != nil {
		return "", "", fmt.Errorf("artifact of %s has an invalid digest %q: %w", a, a.Digest, err)
	}
	if a.URL == "" {
		return "", "", fmt.Errorf("artifact of %s has no URL", a)
	}
	base := filepath.Join(f.Dir, string(d.Algorithm()))
	tarball = filepath.Join(base, d.Encoded()+".tar.gz")
	dir = filepath.Join(base, d.Encoded())

	unlock, err := f.locks.lock(ctx, d.String())
	if err != nil {
		return "", "", fmt.Errorf("waiting for the download of %s's artifact: %w", a, err)
	}
	defer unlock()

	if err := os.MkdirAll(base, 0o750); err != nil {
		return "", "", fmt.Errorf("creating the artifact cache: %w", err)
	}
	if !exists(tarball) {
		if err := f.downloadWithDeadline(ctx, a, d, tarball); err != nil {
			return "", "", err
		}
	}
	if !exists(dir) {
		if err := f.extract(tarball, dir); err != nil {
			return "", "", fmt.Errorf("extracting the artifact of %s (revision %s): %w", a, a.Revision, err)
		}
	}
	// The tarball's mtime records the last use: Prune spares what Fetch
	// returned recently, so this must not fail silently.
	now := time.Now()
	if err := os.Chtimes(tarball, now, now); err != nil {
		return "", "", fmt.Errorf("recording the use of the cached artifact of %s: %w", a, err)
	}
	return tarball, dir, nil
}

// downloadWithDeadline is download bounded by DownloadTimeout, so that a
// stalled server cannot hold the digest's lock for ever when the caller's
// context has no deadline.
func (f *Fetcher) downloadWithDeadline(ctx context.Context, a Artifact, d digest.Digest, dst string) error {
	timeout := f.DownloadTimeout
	if timeout <= 0 {
		timeout = DefaultDownloadTimeout
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := f.download(dctx, a, d, dst)
	if err != nil && ctx.Err() == nil && errors.Is(dctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("the download of the artifact of %s (revision %s) did not finish within %s; "+
			"the next reconcile tries again: %w", a, a.Revision, timeout, err)
	}
	return err
}

// extract unpacks tarball into dir through a temporary directory, so that a
// crash or a refusal mid-way never leaves a partial tree under the final
// name.
func (f *Fetcher) extract(tarball, dir string) error {
	tmp, err := os.MkdirTemp(filepath.Dir(dir), tmpPrefix+filepath.Base(dir)+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	file, err := os.Open(tarball)
	if err != nil {
		return err
	}
	defer file.Close()
	// The digest proves these are the bytes the source published, not that
	// they are reasonable: the cache is shared, so their size is bounded.
	if err := tar.Untar(file, tmp, tar.WithMaxUntarSize(f.Limits.untarLimit()), tar.WithSkipSymlinks()); err != nil {
		return extractTooLarge(err, f.Limits.extracted())
	}
	return os.Rename(tmp, dir)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// tmpPrefix marks partial downloads and extractions, named
// .tmp-<hex>-<random>; Prune removes old ones that no Fetch is writing.
const tmpPrefix = ".tmp-"
