// Package enginemirror serves Terraform and OpenTofu releases on loopback,
// so that a test installs an engine the way production does, through
// hc-install and tofudl, without reaching releases.hashicorp.com,
// get.opentofu.org or GitHub.
//
// One mirror serves two layouts on one httptest.Server:
//
//   - Terraform as HashiCorp's releases API, which hc-install reads from its
//     base URL (TerraformURL):
//     /terraform/index.json (every version),
//     /terraform/<v>/index.json (one version, with one build for this
//     GOOS/GOARCH),
//     /terraform/<v>/terraform_<v>_<os>_<arch>.zip,
//     /terraform/<v>/terraform_<v>_SHA256SUMS,
//     /terraform/<v>/terraform_<v>_SHA256SUMS.sig and
//     /terraform/<v>/terraform_<v>_SHA256SUMS.<KEYID>.sig (hc-install picks
//     the one named by the configured key's short id, else the plain one).
//   - OpenTofu as a tofudl mirror, under OpenTofuURL (<server>/tofu):
//     /tofu/api.json (every version and its files),
//     /tofu/v<v>/tofu_<v>_<os>_<arch>.tar.gz,
//     /tofu/v<v>/tofu_<v>_SHA256SUMS and
//     /tofu/v<v>/tofu_<v>_SHA256SUMS.gpgsig.
//
// Every SHA256SUMS is signed (a detached binary OpenPGP signature) with a key
// the mirror generates; SigningKey is its public half, armored, for a test to
// configure as the engine's signing key. Archives store the binary
// uncompressed: compressing 100 MB for each test would cost more than
// serving it over loopback.
//
// Requests counts requests per path, so that a test can prove that an install
// answered from a cache downloaded nothing.
package enginemirror

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/landform-dev/landform/internal/engines"
)

// The engine names, as Landform's EngineSpec spells them.
const (
	Terraform = "terraform"
	OpenTofu  = "opentofu"
)

// Mirror is a running mirror. It stops when its test ends.
type Mirror struct {
	srv   *httptest.Server
	key   *openpgp.Entity
	dir   string
	files map[string]file
	// done releases stalled requests when the test ends.
	done chan struct{}

	mu       sync.Mutex
	requests map[string]int

	releases []release
	tampered map[string]bool
	otherKey bool
	stall    bool
	listen   string
}

type release struct {
	engine, binary string
	versions       []string
}

// file is one served path: small files in memory, archives on disk.
type file struct {
	contentType string
	data        []byte
	disk        string
	archive     bool
}

// Option configures a Mirror.
type Option func(*Mirror)

// WithTerraform serves the Terraform binary at path binary as each of
// versions. The first version should be the binary's own; any other is an
// extra version, for resolving constraints and filling a cache, whose
// archive holds the very same binary (its `terraform version` still prints
// the first).
func WithTerraform(binary string, versions ...string) Option {
	return func(m *Mirror) { m.releases = append(m.releases, release{Terraform, binary, versions}) }
}

// WithOpenTofu serves the OpenTofu binary at path binary as each of versions,
// the first its own and any other an extra version holding the very same
// binary, as WithTerraform.
func WithOpenTofu(binary string, versions ...string) Option {
	return func(m *Mirror) { m.releases = append(m.releases, release{OpenTofu, binary, versions}) }
}

// Tampered serves engine's archive of version with one byte changed after
// its SHA256SUMS was made and signed: the signature verifies, the checksum
// does not.
func Tampered(engine, version string) Option {
	return func(m *Mirror) { m.tampered[engine+"/"+version] = true }
}

// SignedByAnotherKey signs every SHA256SUMS with a key other than
// SigningKey's, as a mirror would whose releases someone re-signed.
func SignedByAnotherKey() Option {
	return func(m *Mirror) { m.otherKey = true }
}

// StallingArchives makes every archive request hang until its client gives
// up, for testing a download's deadline.
func StallingArchives() Option {
	return func(m *Mirror) { m.stall = true }
}

// Listen serves on addr (host:port) instead of a loopback port of its own:
// for a mirror that Pods reach on the node's address (e2e/enginemirror).
func Listen(addr string) Option {
	return func(m *Mirror) { m.listen = addr }
}

// New starts a mirror serving the releases opts name, stopped when t ends.
func New(t testing.TB, opts ...Option) *Mirror {
	t.Helper()
	m, err := Start(t.TempDir(), opts...)
	if err != nil {
		t.Fatalf("enginemirror: %v", err)
	}
	t.Cleanup(m.Close)
	return m
}

// Start starts a mirror keeping its files in dir, for a suite's TestMain
// (New is for one test); Close stops it.
func Start(dir string, opts ...Option) (*Mirror, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	m := &Mirror{
		dir:      dir,
		files:    map[string]file{},
		done:     make(chan struct{}),
		requests: map[string]int{},
		tampered: map[string]bool{},
	}
	for _, o := range opts {
		o(m)
	}
	var err error
	if m.key, err = newKey("Landform test mirror"); err != nil {
		return nil, err
	}
	signer := m.key
	if m.otherKey {
		if signer, err = newKey("Someone else"); err != nil {
			return nil, err
		}
	}
	for _, r := range m.releases {
		if err := m.add(r, signer); err != nil {
			return nil, fmt.Errorf("%s %v: %w", r.engine, r.versions, err)
		}
	}
	if err := m.addIndexes(); err != nil {
		return nil, err
	}
	m.srv = httptest.NewUnstartedServer(http.HandlerFunc(m.serve))
	if m.listen != "" {
		l, err := net.Listen("tcp", m.listen)
		if err != nil {
			return nil, err
		}
		_ = m.srv.Listener.Close()
		m.srv.Listener = l
	}
	m.srv.Start()
	return m, nil
}

// Close stops the mirror.
func (m *Mirror) Close() {
	close(m.done)
	m.srv.Close()
}

// TerraformURL is the base URL of the Terraform releases API: the engine's
// releases URL (hc-install's ApiBaseURL).
func (m *Mirror) TerraformURL() string { return m.srv.URL }

// OpenTofuURL is the base URL of the OpenTofu mirror: the engine's releases
// URL (api.json and v<version>/<artifact> below it).
func (m *Mirror) OpenTofuURL() string { return m.srv.URL + "/tofu" }

// URL is the releases URL of engine (TerraformURL or OpenTofuURL).
func (m *Mirror) URL(engine string) string {
	if engine == OpenTofu {
		return m.OpenTofuURL()
	}
	return m.TerraformURL()
}

// SigningKey is the armored OpenPGP public key the mirror's releases are
// signed with (unless SignedByAnotherKey).
func (m *Mirror) SigningKey() string {
	var b bytes.Buffer
	w, err := armor.Encode(&b, openpgp.PublicKeyType, nil)
	if err != nil {
		panic(err)
	}
	if err := m.key.Serialize(w); err != nil {
		panic(err)
	}
	_ = w.Close()
	return b.String()
}

// Requests is how many requests the mirror answered for path (e.g.
// ArchivePath's), whatever their status.
func (m *Mirror) Requests(path string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests[path]
}

// TotalRequests is how many requests the mirror answered for any path.
func (m *Mirror) TotalRequests() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, c := range m.requests {
		n += c
	}
	return n
}

// ArchivePath is the URL path of engine's archive of version for this
// GOOS/GOARCH.
func ArchivePath(engine, version string) string {
	if engine == OpenTofu {
		return "/tofu/v" + version + "/" + tofuArchive(version)
	}
	return "/terraform/" + version + "/" + terraformArchive(version)
}

// Unreachable returns a loopback URL nothing listens on: a mirror that is
// down.
func Unreachable(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("enginemirror: %v", err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return "http://" + addr
}

// CountsPath answers with Requests of every path, as JSON, for a test
// whose mirror runs in another process (e2e/enginemirror). It is not
// counted.
const CountsPath = "/_requests"

func (m *Mirror) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == CountsPath {
		m.mu.Lock()
		defer m.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(m.requests)
		return
	}
	m.mu.Lock()
	m.requests[r.URL.Path]++
	m.mu.Unlock()
	f, ok := m.files[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if f.archive && m.stall {
		select {
		case <-r.Context().Done():
		case <-m.done:
		}
		return
	}
	w.Header().Set("Content-Type", f.contentType)
	if f.disk == "" {
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.data))
		return
	}
	d, err := os.Open(f.disk)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer d.Close()
	http.ServeContent(w, r, "", time.Time{}, d)
}

func terraformArchive(v string) string {
	return fmt.Sprintf("terraform_%s_%s_%s.zip", v, runtime.GOOS, runtime.GOARCH)
}

func tofuArchive(v string) string {
	return fmt.Sprintf("tofu_%s_%s_%s.tar.gz", v, runtime.GOOS, runtime.GOARCH)
}

// add serves r's versions: one archive of the binary serves them all, since
// the archive holds only the binary; a tampered version gets a copy.
func (m *Mirror) add(r release, signer *openpgp.Entity) error {
	archive := filepath.Join(m.dir, r.engine+"-"+fmt.Sprint(len(m.files)))
	var err error
	if r.engine == Terraform {
		err = writeArchive(archive, r.binary, zipBinary)
	} else {
		err = writeArchive(archive, r.binary, tarGzBinary)
	}
	if err != nil {
		return err
	}
	sum, err := engines.FileSHA256(archive)
	if err != nil {
		return err
	}
	for _, v := range r.versions {
		served := archive
		if m.tampered[r.engine+"/"+v] {
			if served, err = tamperedCopy(archive, v); err != nil {
				return err
			}
		}
		name, dir, contentType := terraformArchive(v), "/terraform/"+v+"/", "application/zip"
		prefix := "terraform_"
		if r.engine == OpenTofu {
			name, dir, contentType, prefix = tofuArchive(v), "/tofu/v"+v+"/", "application/gzip", "tofu_"
		}
		m.files[dir+name] = file{contentType: contentType, disk: served, archive: true}
		sums := []byte(sum + "  " + name + "\n")
		sig, err := sign(signer, sums)
		if err != nil {
			return err
		}
		sumsName := prefix + v + "_SHA256SUMS"
		m.files[dir+sumsName] = file{contentType: "text/plain", data: sums}
		if r.engine == OpenTofu {
			m.files[dir+sumsName+".gpgsig"] = file{contentType: "application/octet-stream", data: sig}
			continue
		}
		m.files[dir+sumsName+".sig"] = file{contentType: "application/octet-stream", data: sig}
		m.files[dir+sumsName+"."+signer.PrimaryKey.KeyIdShortString()+".sig"] = file{contentType: "application/octet-stream", data: sig}
	}
	return nil
}

// terraformVersion is one version in the releases API's JSON, as
// hc-install's releasesjson.ProductVersion reads it.
type terraformVersion struct {
	Name        string           `json:"name"`
	Version     string           `json:"version"`
	SHASUMS     string           `json:"shasums"`
	SHASUMSSig  string           `json:"shasums_signature"`
	SHASUMSSigs []string         `json:"shasums_signatures"`
	Builds      []terraformBuild `json:"builds"`
}

type terraformBuild struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
	Filename string `json:"filename"`
	URL      string `json:"url"`
}

// tofuVersion is one version in tofudl's api.json.
type tofuVersion struct {
	ID    string   `json:"id"`
	Files []string `json:"files"`
}

// addIndexes serves the version listings: Terraform's product and version
// indexes, OpenTofu's api.json. A build's URL is a path on the official
// host, as in the real index: hc-install joins its path to the configured
// base URL.
func (m *Mirror) addIndexes() error {
	tf := map[string]terraformVersion{}
	var tofu []tofuVersion
	for _, r := range m.releases {
		for _, v := range r.versions {
			if r.engine == OpenTofu {
				tofu = append(tofu, tofuVersion{ID: v, Files: []string{tofuArchive(v), "tofu_" + v + "_SHA256SUMS", "tofu_" + v + "_SHA256SUMS.gpgsig"}})
				continue
			}
			var sigs []string
			for p := range m.files {
				if dir, name := path.Split(p); dir == "/terraform/"+v+"/" && strings.HasSuffix(name, ".sig") {
					sigs = append(sigs, name)
				}
			}
			slices.Sort(sigs)
			tv := terraformVersion{
				Name: Terraform, Version: v,
				SHASUMS:     "terraform_" + v + "_SHA256SUMS",
				SHASUMSSig:  "terraform_" + v + "_SHA256SUMS.sig",
				SHASUMSSigs: sigs,
				Builds: []terraformBuild{{
					Name: Terraform, Version: v, OS: runtime.GOOS, Arch: runtime.GOARCH,
					Filename: terraformArchive(v),
					URL:      "https://releases.hashicorp.com" + ArchivePath(Terraform, v),
				}},
			}
			tf[v] = tv
			b, err := json.Marshal(tv)
			if err != nil {
				return err
			}
			m.files["/terraform/"+v+"/index.json"] = file{contentType: "application/json", data: b}
		}
	}
	if len(tf) > 0 {
		b, err := json.Marshal(map[string]any{"name": Terraform, "versions": tf})
		if err != nil {
			return err
		}
		m.files["/terraform/index.json"] = file{contentType: "application/json", data: b}
	}
	if len(tofu) > 0 {
		b, err := json.Marshal(map[string]any{"versions": tofu})
		if err != nil {
			return err
		}
		m.files["/tofu/api.json"] = file{contentType: "application/json", data: b}
	}
	return nil
}

func newKey(name string) (*openpgp.Entity, error) {
	return openpgp.NewEntity(name, "", "test@landform.invalid", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
}

func sign(key *openpgp.Entity, data []byte) ([]byte, error) {
	var sig bytes.Buffer
	if err := openpgp.DetachSign(&sig, key, bytes.NewReader(data), nil); err != nil {
		return nil, err
	}
	return sig.Bytes(), nil
}

func writeArchive(dst, binary string, pack func(io.Writer, *os.File, os.FileInfo) error) error {
	src, err := os.Open(binary)
	if err != nil {
		return err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if err := pack(out, src, fi); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

func zipBinary(w io.Writer, bin *os.File, fi os.FileInfo) error {
	z := zip.NewWriter(w)
	h := &zip.FileHeader{Name: "terraform", Method: zip.Store, Modified: fi.ModTime()}
	h.SetMode(0o755)
	f, err := z.CreateHeader(h)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, bin); err != nil {
		return err
	}
	return z.Close()
}

func tarGzBinary(w io.Writer, bin *os.File, fi os.FileInfo) error {
	gz, err := gzip.NewWriterLevel(w, gzip.NoCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: "tofu", Mode: 0o755, Size: fi.Size(), ModTime: fi.ModTime(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := io.Copy(tw, bin); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// tamperedCopy copies archive with its middle byte flipped: inside the
// binary, where nothing but the checksum notices.
func tamperedCopy(archive, version string) (string, error) {
	b, err := os.ReadFile(archive)
	if err != nil {
		return "", err
	}
	b[len(b)/2] ^= 0xff
	dst := archive + "-tampered-" + version
	return dst, os.WriteFile(dst, b, 0o600)
}
