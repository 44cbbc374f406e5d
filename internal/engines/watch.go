package engines

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path"
	"strings"
	"sync"
	"time"
)

// watch is the HTTP transport of one download or listing: it caps the
// bytes read and remembers the first request that failed.
//
// It is how a failure of the source is told from a failure of
// verification, which neither library does by type: hc-install v0.10.0
// formats a refused connection, a 404 and a checksum mismatch alike with
// fmt.Errorf, and tofudl v0.0.1's DownloadVersion, when an archive's
// download fails, goes on to verify the empty archive and reports it
// corrupted. A download during which any request failed is unavailable,
// never unverified.
//
// For hc-install, which loses some errors altogether (see
// downloadTerraform), it also keeps what checking its work takes: the
// SHA256SUMS it fetched, the digest of each body read to its end, and with
// tee set a copy of the zip archive.
type watch struct {
	base    http.RoundTripper
	limit   int64
	timeout time.Duration
	// tee, if set, is the file a .zip body is copied to.
	tee string

	mu     sync.Mutex
	read   int64
	failed *failure
	// local is a failure on this side (writing tee).
	local error
	// teeFile is tee while it is open.
	teeFile *os.File
	// digests are the sha256 of the bodies read to their end, by file
	// name.
	digests map[string]string
	// sums are the bodies of the SHA256SUMS files, by file name.
	sums map[string][]byte
}

// failure is the first request of a watch that failed.
type failure struct {
	url, reason string
}

// errTooLarge ends a download beyond watch.limit.
var errTooLarge = errors.New("download size limit exceeded")

func (w *watch) client() *http.Client { return &http.Client{Transport: w} }

// failure returns the first failed request, or nil.
func (w *watch) failure() *failure {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

func (w *watch) fail(url, reason string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed == nil {
		w.failed = &failure{url: url, reason: reason}
	}
}

func (w *watch) reason(err error) string {
	switch {
	case errors.Is(err, errTooLarge):
		return fmt.Sprintf("the download exceeds its limit of %d bytes", w.limit)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("no complete answer within %s", w.timeout)
	}
	return err.Error()
}

func (w *watch) RoundTrip(req *http.Request) (*http.Response, error) {
	u := req.URL.Redacted()
	resp, err := w.base.RoundTrip(req)
	if err != nil {
		w.fail(u, w.reason(err))
		return nil, err
	}
	if resp.StatusCode == http.StatusNotFound {
		w.fail(u, "it is not offered there ("+resp.Status+")")
		return resp, nil
	}
	if resp.StatusCode != http.StatusOK {
		w.fail(u, resp.Status)
		return resp, nil
	}
	w.mu.Lock()
	over := resp.ContentLength > w.limit-w.read
	w.mu.Unlock()
	if over {
		_ = resp.Body.Close()
		w.fail(u, w.reason(errTooLarge))
		return nil, errTooLarge
	}
	b := &watchedBody{ReadCloser: resp.Body, w: w, url: u, name: path.Base(req.URL.Path), hash: sha256.New()}
	if strings.HasSuffix(b.name, "_SHA256SUMS") {
		b.keep = new(strings.Builder)
	}
	if w.tee != "" && strings.HasSuffix(b.name, ".zip") {
		if b.tee, err = os.Create(w.tee); err != nil {
			w.localFailure(err)
			_ = resp.Body.Close()
			return nil, err
		}
		w.mu.Lock()
		w.teeFile = b.tee
		w.mu.Unlock()
	}
	resp.Body = b
	return resp, nil
}

// localFailed returns the first failure on this side, or nil.
func (w *watch) localFailed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.local
}

func (w *watch) localFailure(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.local == nil {
		w.local = err
	}
}

// watchedBody counts what is read against the watch's limit, records a
// body that breaks off, and hashes (and keeps, and copies) what it passes.
type watchedBody struct {
	io.ReadCloser
	w         *watch
	url, name string
	hash      hash.Hash
	keep      *strings.Builder
	tee       *os.File
	ended     bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.hash.Write(p[:n])
	if b.keep != nil {
		b.keep.Write(p[:n])
	}
	if b.tee != nil {
		if _, werr := b.tee.Write(p[:n]); werr != nil {
			b.w.localFailure(werr)
			return n, werr
		}
	}
	b.w.mu.Lock()
	b.w.read += int64(n)
	over := b.w.read > b.w.limit
	b.w.mu.Unlock()
	if over {
		err = errTooLarge
	}
	switch {
	case err == io.EOF && !b.ended:
		b.ended = true
		b.w.mu.Lock()
		if b.w.digests == nil {
			b.w.digests, b.w.sums = map[string]string{}, map[string][]byte{}
		}
		b.w.digests[b.name] = hex.EncodeToString(b.hash.Sum(nil))
		if b.keep != nil {
			b.w.sums[b.name] = []byte(b.keep.String())
		}
		b.w.mu.Unlock()
	case err != nil && err != io.EOF:
		b.w.fail(b.url, b.w.reason(err))
	}
	return n, err
}

func (b *watchedBody) Close() error {
	b.w.closeTee()
	return b.ReadCloser.Close()
}

// closeTee closes tee, if open: when its body is closed, or when the
// download ends with a body its reader never closed.
func (w *watch) closeTee() {
	w.mu.Lock()
	f := w.teeFile
	w.teeFile = nil
	w.mu.Unlock()
	if f != nil {
		if err := f.Close(); err != nil {
			w.localFailure(err)
		}
	}
}

// archiveMismatch checks each fully read body that a SHA256SUMS read
// through w lists against its checksum there, and returns the first that
// does not match.
func (w *watch) archiveMismatch() *checksumError {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, sums := range w.sums {
		for _, line := range strings.Split(string(sums), "\n") {
			f := strings.Fields(line)
			if len(f) != 2 {
				continue
			}
			if got, ok := w.digests[f[1]]; ok && got != f[0] {
				return &checksumError{file: f[1], listed: f[0], got: got}
			}
		}
	}
	return nil
}

// checksumError is a file whose sha256 is not the one its signed
// SHA256SUMS lists.
type checksumError struct {
	file, listed, got string
}

func (e *checksumError) Error() string {
	return fmt.Sprintf("%s has sha256 %s, its SHA256SUMS lists %s", e.file, e.got, e.listed)
}
