package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"
	"k8s.io/apimachinery/pkg/util/wait"
)

// download fetches a into dst, retrying transient failures with a doubling
// wait. dst appears only once its content matches d.
func (f *Fetcher) download(ctx context.Context, a Artifact, d digest.Digest, dst string) error {
	u, err := url.Parse(a.URL)
	if err != nil {
		return fmt.Errorf("artifact of %s has an invalid URL: %w", a, err)
	}
	if f.Host != "" {
		u.Host = f.Host
	}
	retries := wait.Backoff{Duration: f.RetryWait, Factor: 2, Steps: f.Retries + 1}
	werr := wait.ExponentialBackoffWithContext(ctx, retries, func(ctx context.Context) (bool, error) {
		err = f.downloadOnce(ctx, u, d, dst)
		var t transientError
		return err == nil || !errors.As(err, &t), nil
	})
	switch {
	case ctx.Err() != nil && errors.Is(werr, ctx.Err()):
		return fmt.Errorf("downloading the artifact of %s: %w (after: %w)", a, ctx.Err(), err)
	case err == nil:
		return nil
	case errors.Is(err, ErrDigestMismatch):
		return fmt.Errorf("%w: the artifact of %s (revision %s) served at %s does not match digest %s; "+
			"source-controller may have replaced it, the next reconcile fetches the current one",
			ErrDigestMismatch, a, a.Revision, u.Redacted(), d)
	default:
		return fmt.Errorf("downloading the artifact of %s (revision %s): %w", a, a.Revision, err)
	}
}

// transientError is a failure worth retrying.
type transientError struct{ err error }

func (t transientError) Error() string { return t.err.Error() }
func (t transientError) Unwrap() error { return t.err }

// downloadOnce makes one attempt: it writes to a temporary file next to dst,
// hashing while writing, and renames it to dst only when the digest matches
// and the body is within the download bound.
func (f *Fetcher) downloadOnce(ctx context.Context, u *url.URL, d digest.Digest, dst string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	hc := f.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return transientError{err}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return transientError{fmt.Errorf("%s answered %s", u.Redacted(), resp.Status)}
	default:
		// 404 usually means source-controller has garbage-collected this
		// revision after publishing a newer one.
		return fmt.Errorf("%s answered %s", u.Redacted(), resp.Status)
	}
	// Not retried: the bytes of a digest are no smaller the next time.
	limit := f.Limits.download()
	if limit >= 0 && resp.ContentLength > limit {
		return downloadTooLarge(fmt.Sprintf("%s declares %s (Content-Length),", u.Redacted(), sizeString(resp.ContentLength)), limit)
	}

	// The digest in the name lets Prune tell whose lock guards it.
	tmp, err := os.CreateTemp(filepath.Dir(dst), tmpPrefix+d.Encoded()+"-*.tar.gz")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	verifier := d.Verifier()
	body := io.Reader(resp.Body)
	if limit >= 0 {
		// One byte more than the bound tells a body at the bound from one over it.
		body = io.LimitReader(resp.Body, limit+1)
	}
	n, err := io.Copy(io.MultiWriter(tmp, verifier), body)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return transientError{fmt.Errorf("reading %s: %w", u.Redacted(), err)}
	}
	if limit >= 0 && n > limit {
		return downloadTooLarge(u.Redacted()+" sent", limit)
	}
	if !verifier.Verified() {
		return ErrDigestMismatch
	}
	return os.Rename(tmp.Name(), dst)
}
