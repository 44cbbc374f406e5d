package testenv

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	fluxtar "github.com/fluxcd/pkg/tar"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Artifacts serves tarballs from a directory over HTTP, as
// source-controller's storage does, publishes them as the artifacts of
// GitRepositories (no source-controller runs), and counts the downloads.
type Artifacts struct {
	dir string
	srv *httptest.Server

	mu        sync.Mutex
	downloads int
	published map[string]int
}

// StartArtifacts serves dir, creating it.
func StartArtifacts(dir string) (*Artifacts, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	a := &Artifacts{dir: dir, published: map[string]int{}}
	files := http.FileServer(http.Dir(dir))
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			a.mu.Lock()
			a.downloads++
			a.mu.Unlock()
		}
		files.ServeHTTP(w, r)
	}))
	return a, nil
}

// Close stops serving.
func (a *Artifacts) Close() { a.srv.Close() }

// Downloads counts the artifacts downloaded so far.
func (a *Artifacts) Downloads() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.downloads
}

// Publish packs files (path → content) as a tarball, serves it, and records
// it as the artifact of the GitRepository "repo" in ns, as source-controller
// would: creating the GitRepository the first time, Ready, with the
// revision main@sha1:<the first 20 bytes of the tarball's sha256> and its
// digest. It returns the revision.
func (a *Artifacts) Publish(ctx context.Context, c client.Client, ns string, files map[string]string) (string, error) {
	data, err := tarball(files)
	if err != nil {
		return "", err
	}
	a.mu.Lock()
	a.published[ns]++
	name := fmt.Sprintf("%s-%d.tar.gz", ns, a.published[ns])
	a.mu.Unlock()
	if err := os.WriteFile(filepath.Join(a.dir, name), data, 0o644); err != nil {
		return "", err
	}
	repo := &sourcev1.GitRepository{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "repo"}, repo); apierrors.IsNotFound(err) {
		repo = &sourcev1.GitRepository{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "repo"},
			Spec:       sourcev1.GitRepositorySpec{URL: "https://example.invalid/repo.git", Interval: metav1.Duration{Duration: time.Hour}},
		}
		if err := c.Create(ctx, repo); err != nil {
			return "", err
		}
	} else if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	size := int64(len(data))
	rev := "main@sha1:" + hex.EncodeToString(sum[:20])
	repo.Status.Artifact = &meta.Artifact{
		Path: name, URL: a.srv.URL + "/" + name,
		Revision:       rev,
		Digest:         "sha256:" + hex.EncodeToString(sum[:]),
		LastUpdateTime: metav1.Now(),
		Size:           &size,
	}
	repo.Status.ObservedGeneration = repo.Generation
	conditions.MarkTrue(repo, meta.ReadyCondition, meta.SucceededReason, "stored artifact for revision %s", rev)
	return rev, c.Status().Update(ctx, repo)
}

// TarDir packs dir as source-controller packs an artifact (a gzipped tar,
// by fluxcd/pkg/tar), and returns it with its digest.
func TarDir(t testing.TB, dir string) (data []byte, digest string) {
	t.Helper()
	var buf bytes.Buffer
	if _, err := fluxtar.Tar(dir, &buf); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return buf.Bytes(), "sha256:" + hex.EncodeToString(sum[:])
}

// tarball packs files as a gzipped tar, in path order, so that the same
// files give the same bytes.
func tarball(files map[string]string) ([]byte, error) {
	names := slices.Sorted(maps.Keys(files))
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(files[n])); err != nil {
			return nil, err
		}
	}
	if err := errors.Join(tw.Close(), gz.Close()); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
