package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/landform-dev/landform/internal/cloud"
	"github.com/landform-dev/landform/runner/server"
)

// cloudModule is the module using the stand-in cloud's provider: one
// security group named after the object (or the raw sample), with the same
// two outputs as the trivial module. The provider reads the cloud's URL
// from LANDFORM_CLOUD_ENDPOINT, as in `landform dev`.
const cloudModule = `terraform {
  required_providers {
    landform = {
      source  = "landform-dev/landform"
      version = "~> 0.1"
    }
  }
}
variable "name" { type = string }
resource "landform_security_group" "this" {
  name        = var.name
  description = "bench"
}
output "id" { value = landform_security_group.this.id }
output "input" { value = landform_security_group.this.name }
`

// cloudEndpointEnv configures the landform provider (internal/devenv's
// CloudEndpointEnv).
const cloudEndpointEnv = "LANDFORM_CLOUD_ENDPOINT"

// cloudServer is the stand-in cloud (internal/cloud, the server
// cmd/landform-cloud runs) on loopback, counting successful creates of
// security groups by name.
type cloudServer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	creates map[string]int
}

func startCloud() *cloudServer {
	c := &cloudServer{creates: map[string]int{}}
	api := cloud.New(cloud.Options{}).Handler()
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/security-groups" {
			api.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(body, &req)
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		api.ServeHTTP(sw, r)
		if sw.code == http.StatusCreated {
			c.mu.Lock()
			c.creates[req.Name]++
			c.mu.Unlock()
		}
	}))
	return c
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// check fails unless every name was created exactly once and exists once
// in the cloud now.
func (c *cloudServer) check(ctx context.Context, names []string) error {
	sgs, err := (&cloud.Client{URL: c.srv.URL}).ListSecurityGroups(ctx)
	if err != nil {
		return fmt.Errorf("listing the stand-in cloud's security groups: %w", err)
	}
	exist := map[string]int{}
	for _, sg := range sgs {
		exist[sg.Name]++
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var bad []string
	for _, n := range names {
		if c.creates[n] != 1 || exist[n] != 1 {
			bad = append(bad, fmt.Sprintf("%s created %d times, exists %d times", n, c.creates[n], exist[n]))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("the stand-in cloud disagrees with the samples: %s", strings.Join(bad, "; "))
	}
	return nil
}

func hclList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = strconv.Quote(x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// networkMirror serves the providers of an unpacked mirror as a provider
// network mirror (the protocol of a registry mirror such as Artifactory's
// or `tofu providers mirror` behind a web server) over HTTPS on loopback,
// each as the zip archive a registry serves.
type networkMirror struct {
	srv    *httptest.Server
	caFile string
	held   []string
}

// startNetworkMirror packs every provider of the unpacked mirror into dir
// and serves dir.
func startNetworkMirror(mirror, dir string) (*networkMirror, error) {
	platform := runtime.GOOS + "_" + runtime.GOARCH
	held := server.MirroredProviders(mirror)
	for _, p := range held {
		versions, _ := os.ReadDir(filepath.Join(mirror, p))
		index := map[string]map[string]any{"versions": {}}
		for _, v := range versions {
			bin := filepath.Join(mirror, p, v.Name(), platform)
			files, err := os.ReadDir(bin)
			if err != nil || len(files) == 0 {
				continue
			}
			typ := filepath.Base(p)
			zipName := fmt.Sprintf("terraform-provider-%s_%s_%s.zip", typ, v.Name(), platform)
			if err := zipDir(bin, filepath.Join(dir, p, zipName)); err != nil {
				return nil, err
			}
			index["versions"][v.Name()] = map[string]any{}
			if err := writeJSONFile(filepath.Join(dir, p, v.Name()+".json"),
				map[string]any{"archives": map[string]any{platform: map[string]any{"url": zipName}}}); err != nil {
				return nil, err
			}
		}
		if err := writeJSONFile(filepath.Join(dir, p, "index.json"), index); err != nil {
			return nil, err
		}
	}
	m := &networkMirror{srv: httptest.NewTLSServer(http.FileServer(http.Dir(dir))), held: held, caFile: filepath.Join(dir, "ca.pem")}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: m.srv.Certificate().Raw})
	if err := os.WriteFile(m.caFile, ca, 0o644); err != nil {
		m.srv.Close()
		return nil, err
	}
	return m, nil
}

// cliConfig sends the mirrored providers to the network mirror only.
func (m *networkMirror) cliConfig() string {
	return fmt.Sprintf("disable_checkpoint = true\n\nprovider_installation {\n  network_mirror {\n    url = %q\n    include = %s\n  }\n  direct {\n    exclude = %s\n  }\n}\n",
		m.srv.URL+"/", hclList(m.held), hclList(m.held))
}

func zipDir(dir, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	files, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, f := range files {
		info, err := f.Info()
		if err != nil {
			return err
		}
		h, err := zip.FileInfoHeader(info)
		if err != nil {
			return err
		}
		h.Method = zip.Deflate
		w, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(filepath.Join(dir, f.Name()))
		if err != nil {
			return err
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(to, buf.Bytes(), 0o644)
}

func writeJSONFile(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// initPhase runs `tofu init` on the cloud module in fresh directories,
// alternating the read-only mirror (Landform's CLI configuration) and the
// network mirror.
func (b *bench) initPhase(r *Report) error {
	nm, err := startNetworkMirror(b.o.providerMirror, filepath.Join(b.tmp, "network-mirror"))
	if err != nil {
		return fmt.Errorf("packing the network mirror: %w", err)
	}
	defer nm.srv.Close()
	withMirror, err := server.CLIConfig([]string{b.o.providerMirror})
	if err != nil {
		return err
	}
	with, without := &r.Init.WithMirror, &r.Init.WithoutMirror
	for i := 0; i < b.o.samples; i++ {
		for _, c := range []struct {
			name, config string
			to           *InitCase
		}{
			{"with", withMirror, with},
			{"without", nm.cliConfig(), without},
		} {
			dir := filepath.Join(b.tmp, fmt.Sprintf("init-%s-%d", c.name, i))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			for name, body := range map[string]string{"main.tf": cloudModule, "cli.tfrc": c.config} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
					return err
				}
			}
			cmd := exec.Command(b.o.Tofu, "init", "-input=false", "-no-color")
			cmd.Dir = dir
			cmd.Env = append(cleanEnv(), "TF_CLI_CONFIG_FILE="+filepath.Join(dir, "cli.tfrc"), "TF_IN_AUTOMATION=1",
				"HOME="+dir, "CHECKPOINT_DISABLE=1", "SSL_CERT_FILE="+nm.caFile)
			start := time.Now()
			out, err := cmd.CombinedOutput()
			if err != nil {
				return fmt.Errorf("tofu init %s the mirror: %w\n%s", c.name, err, out)
			}
			c.to.Seconds = append(c.to.Seconds, time.Since(start).Seconds())
			c.to.CPUSeconds = append(c.to.CPUSeconds, (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds())
			c.to.ProviderBytes = regularBytes(filepath.Join(dir, ".terraform", "providers"))
		}
	}
	for _, c := range []*InitCase{with, without} {
		c.Median, c.CPUMedian = median(c.Seconds), median(c.CPUSeconds)
	}
	r.Init.Ratio = ratio(without.Median, with.Median)
	log("init: with the read-only mirror %.2fs, without %.2fs", with.Median, without.Median)
	return nil
}

// regularBytes is the size of the regular files under dir (a symlink to
// the mirror counts nothing: nothing was copied).
func regularBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
