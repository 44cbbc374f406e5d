package source

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// entry is one tarball member: a file when link is empty, else a symlink.
type entry struct {
	name, content, link string
}

// tarball builds a gzip'd tar as source-controller serves it.
func tarball(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.content)), Typeflag: tar.TypeReg}
		if e.link != "" {
			h = &tar.Header{Name: e.name, Mode: 0o777, Linkname: e.link, Typeflag: tar.TypeSymlink}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sha(b []byte) string {
	return fmt.Sprintf("sha256:%x", sha256.Sum256(b))
}

// artifactServer serves files by path and counts requests. fail, when set,
// decides per request (1-based) whether to answer with that status instead.
type artifactServer struct {
	*httptest.Server
	mu       sync.Mutex
	files    map[string][]byte
	requests atomic.Int32
	fail     func(n int32) int
	gate     chan struct{} // when set, each request waits for it to close
	// stall, when set, makes each request send half the body and then wait
	// for stall to close or the client to go away.
	stall chan struct{}
	// noLength, when set, sends the body without a Content-Length (chunked).
	noLength bool
}

func newArtifactServer(t *testing.T) *artifactServer {
	s := &artifactServer{files: map[string][]byte{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := s.requests.Add(1)
		if s.gate != nil {
			<-s.gate
		}
		if s.fail != nil {
			if code := s.fail(n); code != 0 {
				w.WriteHeader(code)
				return
			}
		}
		s.mu.Lock()
		b, ok := s.files[r.URL.Path]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		if s.stall != nil {
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			_, _ = w.Write(b[:len(b)/2])
			w.(http.Flusher).Flush()
			select {
			case <-s.stall:
			case <-r.Context().Done():
			}
			return
		}
		if s.noLength {
			w.(http.Flusher).Flush() // headers go before the length is known
		} else {
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(s.Close)
	return s
}

// serve publishes b at path and returns an Artifact for it with digest
// (the real one when digest is empty).
func (s *artifactServer) serve(path string, b []byte, digest string) Artifact {
	s.mu.Lock()
	s.files[path] = b
	s.mu.Unlock()
	if digest == "" {
		digest = sha(b)
	}
	return Artifact{Kind: "GitRepository", Namespace: "flux-system", Name: "infra",
		Revision: "main@sha1:abc", Digest: digest, URL: s.URL + path}
}

// eventually fails t unless cond holds within five seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
