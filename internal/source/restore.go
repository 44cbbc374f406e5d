package source

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/opencontainers/go-digest"
)

// Cached returns the tarball and the extracted tree of the artifact with
// digest d when the cache holds it (ok false otherwise), without asking
// any source: for an artifact whose source is gone. Like Fetch, it
// records the use, so that Prune spares it for a while.
func (f *Fetcher) Cached(ctx context.Context, d string) (tarball, dir string, ok bool, err error) {
	dg, err := digest.Parse(d)
	if err != nil {
		return "", "", false, fmt.Errorf("invalid artifact digest %q: %w", d, err)
	}
	tarball, dir = f.paths(dg)
	unlock, err := f.locks.lock(ctx, dg.String())
	if err != nil {
		return "", "", false, fmt.Errorf("waiting for the cached artifact %s: %w", d, err)
	}
	defer unlock()
	if !exists(tarball) {
		return "", "", false, nil
	}
	if err := f.ready(tarball, dir); err != nil {
		return "", "", false, fmt.Errorf("artifact %s: %w", d, err)
	}
	return tarball, dir, true, nil
}

// Restore puts data, an artifact tarball kept elsewhere, into the cache
// under digest d, as if Fetch had downloaded it, and returns the same
// paths Fetch would. data is verified against d before anything enters
// the cache or is extracted (ErrDigestMismatch).
func (f *Fetcher) Restore(ctx context.Context, d string, data []byte) (tarball, dir string, err error) {
	dg, err := digest.Parse(d)
	if err != nil {
		return "", "", fmt.Errorf("invalid artifact digest %q: %w", d, err)
	}
	if !dg.Algorithm().Available() {
		return "", "", fmt.Errorf("artifact %s: digest algorithm %s is not available", d, dg.Algorithm())
	}
	if got := dg.Algorithm().FromBytes(data); got != dg {
		return "", "", fmt.Errorf("%w: the kept artifact is %s, not %s", ErrDigestMismatch, got, dg)
	}
	tarball, dir = f.paths(dg)
	unlock, err := f.locks.lock(ctx, dg.String())
	if err != nil {
		return "", "", fmt.Errorf("waiting for the cached artifact %s: %w", d, err)
	}
	defer unlock()
	if err := os.MkdirAll(filepath.Dir(tarball), 0o750); err != nil {
		return "", "", fmt.Errorf("creating the artifact cache: %w", err)
	}
	if !exists(tarball) {
		if err := writeAtomic(tarball, dg, data); err != nil {
			return "", "", fmt.Errorf("restoring artifact %s into the cache: %w", d, err)
		}
	}
	if err := f.ready(tarball, dir); err != nil {
		return "", "", fmt.Errorf("artifact %s: %w", d, err)
	}
	return tarball, dir, nil
}

// paths are where the cache holds the artifact with digest d.
func (f *Fetcher) paths(d digest.Digest) (tarball, dir string) {
	base := filepath.Join(f.Dir, string(d.Algorithm()))
	return filepath.Join(base, d.Encoded()+".tar.gz"), filepath.Join(base, d.Encoded())
}

// ready extracts tarball when its tree is missing and records the use.
// The caller holds the digest's lock.
func (f *Fetcher) ready(tarball, dir string) error {
	if !exists(dir) {
		if err := f.extract(tarball, dir); err != nil {
			return fmt.Errorf("extracting: %w", err)
		}
	}
	now := time.Now()
	if err := os.Chtimes(tarball, now, now); err != nil {
		return fmt.Errorf("recording the use of the cached tarball: %w", err)
	}
	return nil
}

// writeAtomic writes data to dst through a temporary file named like a
// partial download, so that dst appears complete or not at all.
func writeAtomic(dst string, d digest.Digest, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(dst), tmpPrefix+d.Encoded()+"-*.tar.gz")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
