package engines_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"testing"

	"github.com/landform-dev/landform/internal/engines"
	"github.com/landform-dev/landform/internal/testenv"
	"github.com/landform-dev/landform/internal/testenv/enginemirror"
)

// The real engines the mirror serves: bin/terraform (1.5.7) and bin/tofu,
// or LANDFORM_TERRAFORM and LANDFORM_TOFU.
var (
	terraformBin, tofuBin string
	tofuVersion           string
	toolsErr              error
)

func TestMain(m *testing.M) {
	terraformBin, toolsErr = testenv.Tool("terraform", "LANDFORM_TERRAFORM")
	if toolsErr == nil {
		tofuBin, toolsErr = testenv.Tool("tofu", "LANDFORM_TOFU")
	}
	if toolsErr == nil {
		tofuVersion, toolsErr = versionOf(tofuBin)
	}
	os.Exit(m.Run())
}

const terraformVersion = "1.5.7"

// engine is one engine under test: its real binary, its version, and what
// `version` prints.
type engine struct {
	name, binary, version, prints string
}

// bothEngines returns the two engines, for table tests.
func bothEngines(t *testing.T) []engine {
	t.Helper()
	testenv.SkipOrFail(t, toolsErr)
	return []engine{
		{engines.Terraform, terraformBin, terraformVersion, "Terraform v" + terraformVersion},
		{engines.OpenTofu, tofuBin, tofuVersion, "OpenTofu v" + tofuVersion},
	}
}

// serve is the mirror option serving e, as its own version and any extra
// ones.
func (e engine) serve(extra ...string) enginemirror.Option {
	versions := append([]string{e.version}, extra...)
	if e.name == engines.OpenTofu {
		return enginemirror.WithOpenTofu(e.binary, versions...)
	}
	return enginemirror.WithTerraform(e.binary, versions...)
}

// spec is e's version from m, checked with m's key.
func (e engine) spec(m *enginemirror.Mirror) engines.Spec {
	return engines.Spec{Name: e.name, Version: e.version, ReleasesURL: m.URL(e.name), SigningKey: m.SigningKey()}
}

// versionOf asks an engine binary for its version.
func versionOf(bin string) (string, error) {
	out, err := engineCommand(bin, "version", "-json").Output()
	if err != nil {
		return "", fmt.Errorf("%s version -json: %w", bin, err)
	}
	var v struct {
		Version string `json:"terraform_version"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return "", fmt.Errorf("%s version -json: %w: %s", bin, err, out)
	}
	return v.Version, nil
}

// engineCommand runs an engine without reaching HashiCorp's checkpoint
// service, and without a CLI configuration whose absence it would warn
// about.
func engineCommand(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "CHECKPOINT_DISABLE=1", "TF_CLI_CONFIG_FILE=")
	return cmd
}

// loopbackOnly is the transport of every Installer and Resolver under test:
// a request for anything but a loopback address fails the test, so no test
// can reach releases.hashicorp.com, get.opentofu.org or GitHub.
func loopbackOnly(t *testing.T) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		if ip := net.ParseIP(r.URL.Hostname()); ip == nil || !ip.IsLoopback() {
			t.Errorf("a request left loopback: %s", r.URL.Redacted())
			return nil, fmt.Errorf("%s is not a loopback address", r.URL.Host)
		}
		return http.DefaultTransport.RoundTrip(r)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// entries lists what is in dir, for asserting that nothing was left there.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}
