package main

// End-to-end tests: build the provider into a filesystem mirror, then drive
// a real engine (OpenTofu by default) through init, apply, drift and destroy.
//
// The engine is $LANDFORM_TOFU, or bin/tofu at the repository root (built by
// `make tools`). Terraform works as well: LANDFORM_TOFU=$(command -v terraform).

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

const testVersion = "0.1.0"

// cliConfig is the CLI configuration file pointing at the test mirror.
var cliConfig string

// testTmp is a directory that lives as long as the test binary.
var testTmp string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "landform-provider-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	testTmp = tmp

	mirror := filepath.Join(tmp, "mirror")
	if err := buildIntoMirror(mirror); err != nil {
		fmt.Fprintln(os.Stderr, "building the provider:", err)
		return 1
	}
	cliConfig = filepath.Join(tmp, "cli.tfrc")
	cfg := fmt.Sprintf(`provider_installation {
  filesystem_mirror {
    path    = %q
    include = ["registry.terraform.io/landform-dev/*", "registry.opentofu.org/landform-dev/*"]
  }
  direct {
    exclude = ["registry.terraform.io/landform-dev/*", "registry.opentofu.org/landform-dev/*"]
  }
}
`, mirror)
	if err := os.WriteFile(cliConfig, []byte(cfg), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// buildIntoMirror builds this package into the unpacked mirror layout under
// both registry hosts, as hack/build-provider.sh does.
func buildIntoMirror(mirror string) error {
	file := "terraform-provider-landform_v" + testVersion
	platform := runtime.GOOS + "_" + runtime.GOARCH
	var first string
	for _, host := range []string{"registry.terraform.io", "registry.opentofu.org"} {
		dst := filepath.Join(mirror, host, "landform-dev", "landform", testVersion, platform, file)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if first != "" {
			data, err := os.ReadFile(first)
			if err != nil {
				return err
			}
			if err := os.WriteFile(dst, data, 0o755); err != nil {
				return err
			}
			continue
		}
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-X main.version="+testVersion, "-o", dst, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v\n%s", err, out)
		}
		first = dst
	}
	return nil
}

// engine returns the path of the tofu (or terraform) binary to test with.
func engine(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("LANDFORM_TOFU"); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("LANDFORM_TOFU=%s: %v", bin, err)
		}
		return bin
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin", "tofu")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no engine: set LANDFORM_TOFU to a tofu or terraform binary, or run `make tools` to build %s (%v)", bin, err)
	}
	return bin
}

type tf struct {
	t   *testing.T
	bin string
	dir string
	// env is added to the engine's environment (later entries win).
	env []string
}

// newTF writes cfg as main.tf of a new working directory, where the
// engine it returns runs.
func newTF(t *testing.T, cfg string) *tf {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &tf{t: t, bin: engine(t), dir: dir}
	out, _ := e.exec("version")
	t.Logf("engine %s: %s", e.bin, strings.SplitN(out, "\n", 2)[0])
	return e
}

// exec runs the engine and returns its combined output and exit code.
func (e *tf) exec(args ...string) (string, int) {
	e.t.Helper()
	cmd := exec.Command(e.bin, args...)
	cmd.Dir = e.dir
	// Nothing from the caller's TF_* environment (TF_IN_AUTOMATION, a plugin
	// cache, a CLI config of its own…) may leak into the test.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TF_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "TF_CLI_CONFIG_FILE="+cliConfig, "TF_INPUT=0", "CHECKPOINT_DISABLE=1")
	cmd.Env = append(cmd.Env, e.env...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return buf.String(), 0
	case errors.As(err, &exit):
		return buf.String(), exit.ExitCode()
	default:
		e.t.Fatalf("%s %s: %v", e.bin, strings.Join(args, " "), err)
		return "", -1
	}
}

// must runs the engine and fails the test unless it succeeds.
func (e *tf) must(args ...string) string {
	e.t.Helper()
	out, code := e.exec(args...)
	if code != 0 {
		e.t.Fatalf("%s %s: exit %d\n%s", filepath.Base(e.bin), strings.Join(args, " "), code, out)
	}
	return out
}

// plan saves a plan and returns its human-readable output, whether it has
// changes, and the actions planned per resource address.
func (e *tf) plan() (string, bool, map[string][]string) {
	e.t.Helper()
	out, code := e.exec("plan", "-input=false", "-no-color", "-detailed-exitcode", "-out=tfplan")
	if code != 0 && code != 2 {
		e.t.Fatalf("plan: exit %d\n%s", code, out)
	}
	var shown struct {
		ResourceChanges []struct {
			Address string `json:"address"`
			Change  struct {
				Actions []string `json:"actions"`
			} `json:"change"`
		} `json:"resource_changes"`
	}
	if err := json.Unmarshal([]byte(e.must("show", "-json", "tfplan")), &shown); err != nil {
		e.t.Fatalf("show -json: %v", err)
	}
	actions := map[string][]string{}
	for _, rc := range shown.ResourceChanges {
		if !reflect.DeepEqual(rc.Change.Actions, []string{"no-op"}) {
			actions[rc.Address] = rc.Change.Actions
		}
	}
	return out, code == 2, actions
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

const providerBlock = `terraform {
  required_providers {
    landform = {
      source  = "landform-dev/landform"
      version = "` + testVersion + `"
    }
  }
}
`

// TestFileDrift: init offline, apply, no-op plan, drift by edit (update) and
// by deletion (create), repair, destroy.
func TestFileDrift(t *testing.T) {
	const content, secret = "hello\n", "s3cret-value\n"
	cfg := providerBlock + `
resource "landform_file" "f" {
  path              = "out/sub/hello.txt"
  content           = "hello\n"
  sensitive_content = "s3cret-value\n"
}

output "sha256" { value = landform_file.f.sha256 }
`
	e := newTF(t, cfg)
	dir := e.dir
	file := filepath.Join(dir, "out", "sub", "hello.txt")

	e.must("init", "-input=false", "-no-color")
	if _, err := os.Stat(filepath.Join(dir, ".terraform.lock.hcl")); err != nil {
		t.Fatalf("init wrote no lock file: %v", err)
	}

	assertFile := func(want string) {
		t.Helper()
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("reading %s: %v", file, err)
		}
		if string(got) != want {
			t.Fatalf("%s holds %q, want %q", file, got, want)
		}
		fi, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		if mode := fi.Mode().Perm(); mode != 0o644 {
			t.Fatalf("%s has mode %v, want 0644", file, mode)
		}
	}
	noSecret := func(step, out string) {
		t.Helper()
		if strings.Contains(out, "s3cret") {
			t.Fatalf("%s shows the sensitive content:\n%s", step, out)
		}
	}
	wantPlan := func(step string, want []string) {
		t.Helper()
		out, changes, actions := e.plan()
		noSecret(step, out)
		if want == nil {
			if changes || len(actions) != 0 {
				t.Fatalf("%s: want no changes, got %v\n%s", step, actions, out)
			}
			return
		}
		if !changes || !reflect.DeepEqual(actions, map[string][]string{"landform_file.f": want}) {
			t.Fatalf("%s: want landform_file.f %v, got %v\n%s", step, want, actions, out)
		}
	}

	out := e.must("apply", "-input=false", "-no-color", "-auto-approve")
	noSecret("apply", out)
	assertFile(content + secret)
	var outputs map[string]struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal([]byte(e.must("output", "-json")), &outputs); err != nil {
		t.Fatal(err)
	}
	if got := outputs["sha256"].Value; got != sha(content+secret) {
		t.Fatalf("sha256 output %v, want %s", got, sha(content+secret))
	}
	wantPlan("plan after apply", nil)

	// Edited out of band, the sensitive tail intact.
	if err := os.WriteFile(file, []byte("edited\n"+secret), 0o644); err != nil {
		t.Fatal(err)
	}
	wantPlan("plan after edit", []string{"update"})

	// The sensitive tail edited: still an update, still redacted.
	if err := os.WriteFile(file, []byte("edited\ns3cret-changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantPlan("plan after editing the sensitive part", []string{"update"})

	// Deleted out of band.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	wantPlan("plan after delete", []string{"create"})

	noSecret("repairing apply", e.must("apply", "-input=false", "-no-color", "tfplan"))
	assertFile(content + secret)
	wantPlan("plan after repair", nil)

	// Drift repaired by a plain apply too.
	if err := os.WriteFile(file, []byte("edited\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.must("apply", "-input=false", "-no-color", "-auto-approve")
	assertFile(content + secret)

	e.must("destroy", "-input=false", "-no-color", "-auto-approve")
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("destroy left %s: %v", file, err)
	}
}

// TestFileModule applies modules/file and checks its outputs.
func TestFileModule(t *testing.T) {
	module, err := filepath.Abs(filepath.Join("..", "..", "modules", "file"))
	if err != nil {
		t.Fatal(err)
	}
	const content, secret = "héllo\n", "token-123"
	cfg := providerBlock + fmt.Sprintf(`
module "f" {
  source            = %q
  path              = "${path.root}/data/greeting.txt"
  content           = "héllo\n"
  sensitive_content = "token-123"
}

output "path"           { value = module.f.path }
output "sha256"         { value = module.f.sha256 }
output "content_length" { value = module.f.content_length }
output "meta"           { value = module.f.meta }
output "secret" {
  value     = module.f.secret
  sensitive = true
}
`, module)
	e := newTF(t, cfg)
	dir := e.dir
	e.must("init", "-input=false", "-no-color")
	if out := e.must("apply", "-input=false", "-no-color", "-auto-approve"); strings.Contains(out, secret) {
		t.Fatalf("apply shows the secret:\n%s", out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "data", "greeting.txt"))
	if err != nil || string(got) != content+secret {
		t.Fatalf("greeting.txt: %q, %v", got, err)
	}

	var outputs map[string]struct {
		Sensitive bool            `json:"sensitive"`
		Type      json.RawMessage `json:"type"`
		Value     any             `json:"value"`
	}
	if err := json.Unmarshal([]byte(e.must("output", "-json")), &outputs); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"path":           "./data/greeting.txt",
		"sha256":         sha(content + secret),
		"content_length": float64(len([]rune(content))),
		"meta":           map[string]any{"path": "./data/greeting.txt", "bytes": float64(len([]rune(content)))},
		"secret":         secret,
	}
	for name, w := range want {
		o, ok := outputs[name]
		if !ok {
			t.Errorf("output %s missing", name)
			continue
		}
		if !reflect.DeepEqual(o.Value, w) {
			t.Errorf("output %s = %#v, want %#v", name, o.Value, w)
		}
		if o.Sensitive != (name == "secret") {
			t.Errorf("output %s: sensitive = %v", name, o.Sensitive)
		}
	}
	if string(outputs["content_length"].Type) != `"number"` {
		t.Errorf("content_length has type %s, want number", outputs["content_length"].Type)
	}

	if _, changes, actions := e.plan(); changes {
		t.Fatalf("plan after apply: %v", actions)
	}
	e.must("destroy", "-input=false", "-no-color", "-auto-approve")
	if _, err := os.Stat(filepath.Join(dir, "data", "greeting.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("destroy left the file: %v", err)
	}
}
