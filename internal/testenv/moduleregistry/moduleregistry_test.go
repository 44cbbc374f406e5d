package moduleregistry

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/fluxcd/pkg/tar"
	. "github.com/onsi/gomega"

	"github.com/landform-dev/landform/internal/testenv"
)

const token = "registry-token-Test-0123"

var stub = Module{Namespace: "acme", Name: "net", System: "stub", Version: "1.0.0", Files: map[string]string{
	"main.tf": "output \"cidr\" { value = \"10.20.0.0/16\" }\n",
}}

// The protocol as a client sees it: nothing without the token, the
// package only with the grant its download issued, and every request
// counted.
func TestProtocol(t *testing.T) {
	g := NewWithT(t)
	r := Start(t, token, stub)
	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(r.CACertPEM())).To(BeTrue())
	client := &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	get := func(url, bearer string) (*http.Response, string) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		g.Expect(err).NotTo(HaveOccurred())
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		g.Expect(err).NotTo(HaveOccurred(), "the client trusts the registry's CA")
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		return resp, string(body)
	}
	base := "https://" + Host
	download := base + "/v1/modules/acme/net/stub/1.0.0/download"

	for _, bearer := range []string{"", "another-token"} {
		for _, url := range []string{base + "/.well-known/terraform.json", base + "/v1/modules/acme/net/stub/versions", download} {
			resp, _ := get(url, bearer)
			g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), "%s with token %q", url, bearer)
		}
	}
	g.Expect(r.Refused(Discovery)).To(Equal(2))
	g.Expect(r.Refused(Download)).To(Equal(2))
	g.Expect(r.Authorised(Download)).To(Equal(0))

	_, body := get(base+"/.well-known/terraform.json", token)
	g.Expect(body).To(MatchJSON(`{"modules.v1": "/v1/modules/"}`))
	_, body = get(base+"/v1/modules/acme/net/stub/versions", token)
	g.Expect(body).To(MatchJSON(`{"modules": [{"versions": [{"version": "1.0.0"}]}]}`))
	resp, _ := get(download, token)
	g.Expect(resp.StatusCode).To(Equal(http.StatusNoContent))
	pkgURL := resp.Header.Get("X-Terraform-Get")
	g.Expect(pkgURL).To(HavePrefix(base + "/archive/acme/net/stub/1.0.0.tar.gz?grant="))
	g.Expect(pkgURL).NotTo(ContainSubstring(token))

	resp, _ = get(base+"/archive/acme/net/stub/1.0.0.tar.gz", token)
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), "the token is no grant")
	resp, body = get(pkgURL, "")
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	dir := t.TempDir()
	g.Expect(tar.Untar(bytes.NewReader([]byte(body)), dir)).To(Succeed())
	g.Expect(os.ReadFile(filepath.Join(dir, "main.tf"))).To(BeEquivalentTo(stub.Files["main.tf"]))

	g.Expect(r.Authorised(Discovery)).To(Equal(1))
	g.Expect(r.Authorised(Versions)).To(Equal(1))
	g.Expect(r.Authorised(Download)).To(Equal(1))
	g.Expect(r.Authorised(Package)).To(Equal(1))
	g.Expect(r.Refused(Package)).To(Equal(1))
}

// Both engines install the module with the token from TF_TOKEN_<host> and
// the CA from SSL_CERT_FILE, and say that the registry refused them
// without it.
func TestEnginesInstallWithTheToken(t *testing.T) {
	for _, engine := range []struct{ name, envVar string }{{"tofu", "LANDFORM_TOFU"}, {"terraform", "LANDFORM_TERRAFORM"}} {
		t.Run(engine.name, func(t *testing.T) {
			bin, err := testenv.Tool(engine.name, engine.envVar)
			if err != nil {
				testenv.SkipOrFail(t, err)
			}
			g := NewWithT(t)
			r := Start(t, token, stub)
			dir := t.TempDir()
			ca := filepath.Join(dir, "ca.crt")
			g.Expect(os.WriteFile(ca, r.CACertPEM(), 0o644)).To(Succeed())
			cliConfig := filepath.Join(dir, "cli.tfrc")
			g.Expect(os.WriteFile(cliConfig, nil, 0o644)).To(Succeed())
			module := filepath.Join(dir, "root")
			g.Expect(os.MkdirAll(module, 0o755)).To(Succeed())
			g.Expect(os.WriteFile(filepath.Join(module, "main.tf"), []byte(
				"module \"net\" {\n  source  = \""+Host+"/acme/net/stub\"\n  version = \"1.0.0\"\n}\n"), 0o644)).To(Succeed())
			initWith := func(tok string) (string, error) {
				g.Expect(os.RemoveAll(filepath.Join(module, ".terraform"))).To(Succeed())
				cmd := exec.Command(bin, "init", "-no-color", "-input=false")
				cmd.Dir = module
				cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "CHECKPOINT_DISABLE=1", "TF_CLI_CONFIG_FILE=" + cliConfig,
					"SSL_CERT_FILE=" + ca, TokenEnv + "=" + tok}
				out, err := cmd.CombinedOutput()
				return string(out), err
			}

			out, err := initWith("another-token")
			g.Expect(err).To(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("401 Unauthorized"))
			g.Expect(out).NotTo(ContainSubstring("another-token"))
			g.Expect(r.Authorised(Discovery)).To(Equal(0))

			out, err = initWith(token)
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(os.ReadFile(filepath.Join(module, ".terraform", "modules", "net", "main.tf"))).To(BeEquivalentTo(stub.Files["main.tf"]))
			g.Expect(r.Authorised(Download)).To(Equal(1))
			g.Expect(r.Authorised(Package)).To(Equal(1))
			g.Expect(r.Refused(Download)).To(Equal(0))
			g.Expect(r.Refused(Package)).To(Equal(0))
		})
	}
}
