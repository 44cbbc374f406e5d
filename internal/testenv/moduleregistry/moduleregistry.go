// Package moduleregistry is a stand-in private Terraform module registry
// for tests: it speaks the module registry protocol over HTTPS on
// 127.0.0.1:443 and answers only requests that carry its token, so that a
// test proves that the engine found the registry, trusted its certificate
// and sent the token, from what the registry saw.
//
// It serves, on one server:
//
//   - /.well-known/terraform.json: service discovery, {"modules.v1": "/v1/modules/"};
//   - /v1/modules/<namespace>/<name>/<system>/versions: the versions of a module;
//   - /v1/modules/<namespace>/<name>/<system>/<version>/download: 204 with
//     X-Terraform-Get naming the module's package;
//   - /archive/<namespace>/<name>/<system>/<version>.tar.gz?grant=<grant>:
//     the package.
//
// Every protocol request without "Authorization: Bearer <token>" gets 401.
// The package is not fetched with the token: terraform 1.5 and tofu 1.12
// send none to the X-Terraform-Get URL, even on the registry's own host
// (tried), so private registries answer a download with a signed,
// short-lived URL; this one with a grant that only an authorised download
// request issues, and that names its one package.
//
// Why 127.0.0.1:443: a registry source address names a host and no port or
// scheme (the engine always uses https on 443), the token reaches the
// engine as TF_TOKEN_<host>, whose name cannot carry a port, and the
// engines refuse a registry host without a dot ("localhost"), while
// this machine resolves no dotted name to loopback (*.localhost included:
// the engines' Go resolver reads /etc/hosts and DNS only). An IP address
// is a host like any other to them: TF_TOKEN_127_0_0_1. The certificate is
// issued by a CA the registry generates (CACertPEM); the engine trusts it
// through SSL_CERT_FILE, which Go, and so terraform and tofu, read on
// Linux.
package moduleregistry

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluxcd/pkg/tar"

	"github.com/landform-dev/landform/internal/mtls"
)

// Host is the registry's host in source addresses
// ("127.0.0.1/acme/net/stub"); TokenEnv is the variable that gives the
// engine its token (dots in the host as underscores).
const (
	Host     = "127.0.0.1"
	TokenEnv = "TF_TOKEN_127_0_0_1"
)

// address is where the registry listens.
const address = Host + ":443"

// bindWait is how long Start waits for another test process (a package
// run in parallel by `go test ./...`) to release port 443.
const bindWait = 2 * time.Minute

// Kind is a kind of request, for counting.
type Kind string

const (
	Discovery Kind = "discovery"
	Versions  Kind = "versions"
	Download  Kind = "download"
	Package   Kind = "package"
)

// Module is a module the registry serves: its address
// <Namespace>/<Name>/<System> on the registry's host, one version, and its
// files (name: content).
type Module struct {
	Namespace, Name, System, Version string
	Files                            map[string]string
}

func (m Module) path() string { return m.Namespace + "/" + m.Name + "/" + m.System }

// Registry is a running registry. It stops when its test ends.
type Registry struct {
	token    string
	caPEM    []byte
	packages map[string][]byte // by <namespace>/<name>/<system>/<version>
	versions map[string][]string

	mu         sync.Mutex
	grants     map[string]string // grant: the package it opens
	authorised map[Kind]int
	refused    map[Kind]int
}

// Start serves modules on 127.0.0.1:443 to requests that carry token,
// until t ends. It skips t, saying why, when this process may not listen
// on port 443 (not root), or another process holds the port for longer
// than bindWait.
func Start(t testing.TB, token string, modules ...Module) *Registry {
	t.Helper()
	if token == "" {
		t.Fatal("moduleregistry: an empty token would let every request in")
	}
	r := &Registry{
		token:      token,
		packages:   map[string][]byte{},
		versions:   map[string][]string{},
		grants:     map[string]string{},
		authorised: map[Kind]int{},
		refused:    map[Kind]int{},
	}
	for _, m := range modules {
		pkg, err := archive(t.TempDir(), m.Files)
		if err != nil {
			t.Fatalf("moduleregistry: packing %s: %v", m.path(), err)
		}
		r.packages[m.path()+"/"+m.Version] = pkg
		r.versions[m.path()] = append(r.versions[m.path()], m.Version)
	}
	ca, err := mtls.NewCA("landform-test-module-registry", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServer([]string{Host}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	r.caPEM = ca.CertPEM()

	l, err := listen(address, bindWait)
	if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EADDRINUSE) {
		t.Skipf("the stand-in module registry must listen on %s (registry addresses and TF_TOKEN_<host> name no port), and cannot: %v", address, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:           r,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return r
}

// listen listens on address, waiting up to wait while it is in use.
func listen(address string, wait time.Duration) (net.Listener, error) {
	deadline := time.Now().Add(wait)
	for {
		l, err := net.Listen("tcp", address)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			return l, err
		}
		time.Sleep(time.Second)
	}
}

// archive packs files, written into dir, as a gzipped tarball.
func archive(dir string, files map[string]string) ([]byte, error) {
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	if _, err := tar.Tar(dir, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// CACertPEM is the certificate of the CA that issued the registry's: what
// the engine must trust (SSL_CERT_FILE).
func (r *Registry) CACertPEM() []byte { return r.caPEM }

// Authorised is how many requests of kind the registry answered: with the
// token, or for a package, with a grant.
func (r *Registry) Authorised(kind Kind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.authorised[kind]
}

// Refused is how many requests of kind the registry refused: without the
// token (none, or another), or for a package, without a grant for it.
func (r *Registry) Refused(kind Kind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused[kind]
}

// ServeHTTP implements the module registry protocol.
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	kind, target := route(req.URL.Path)
	if kind == "" || req.Method != http.MethodGet {
		http.NotFound(w, req)
		return
	}
	if !r.admit(kind, target, req) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="moduleregistry"`)
		http.Error(w, `{"errors":["unauthorized"]}`, http.StatusUnauthorized)
		return
	}
	switch kind {
	case Discovery:
		writeJSON(w, map[string]string{"modules.v1": "/v1/modules/"})
	case Versions:
		vs, ok := r.versions[target]
		if !ok {
			http.NotFound(w, req)
			return
		}
		type version struct {
			Version string `json:"version"`
		}
		var list []version
		for _, v := range vs {
			list = append(list, version{v})
		}
		writeJSON(w, map[string]any{"modules": []map[string]any{{"versions": list}}})
	case Download:
		if _, ok := r.packages[target]; !ok {
			http.NotFound(w, req)
			return
		}
		w.Header().Set("X-Terraform-Get", "https://"+req.Host+"/archive/"+target+".tar.gz?grant="+r.grant(target))
		w.WriteHeader(http.StatusNoContent)
	case Package:
		w.Header().Set("Content-Type", "application/gzip")
		_, _ = w.Write(r.packages[target])
	}
}

// admit counts the request and says whether it may be answered.
func (r *Registry) admit(kind Kind, target string, req *http.Request) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ok bool
	if kind == Package {
		ok = r.grants[req.URL.Query().Get("grant")] == target
	} else {
		ok = req.Header.Get("Authorization") == "Bearer "+r.token
	}
	if ok {
		r.authorised[kind]++
	} else {
		r.refused[kind]++
	}
	return ok
}

// grant issues a grant that opens target's package.
func (r *Registry) grant(target string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	g := hex.EncodeToString(b)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.grants[g] = target
	return g
}

// route parses a request path into its kind and the module (and version)
// it names; kind is empty for any other path.
func route(p string) (Kind, string) {
	if p == "/.well-known/terraform.json" {
		return Discovery, ""
	}
	if rest, ok := strings.CutPrefix(p, "/archive/"); ok {
		if target, ok := strings.CutSuffix(rest, ".tar.gz"); ok && strings.Count(target, "/") == 3 {
			return Package, target
		}
		return "", ""
	}
	rest, ok := strings.CutPrefix(p, "/v1/modules/")
	if !ok {
		return "", ""
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 4 && parts[3] == "versions":
		return Versions, strings.Join(parts[:3], "/")
	case len(parts) == 5 && parts[4] == "download":
		return Download, strings.Join(parts[:4], "/")
	}
	return "", ""
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
