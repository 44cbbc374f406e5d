package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/landform-dev/landform/internal/testenv/enginemirror"
	"github.com/landform-dev/landform/runner"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// The runner knows the engine and its version from the binary: the test
// engines (`make tools`) are built from their modules at a release.
func TestEngineIdentity(t *testing.T) {
	tofuVersion := engineFirstLine(t) // "OpenTofu v1.12.6"
	dir := t.TempDir()
	script := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tt := range []struct {
		path, product, version string
	}{
		{path: enginePath, product: "OpenTofu", version: tofuVersion[len("OpenTofu v"):]},
		{path: terraformBinary(t), product: "Terraform", version: "1.5.7"},
		// A wrapper tells by its name, and its version only when the
		// name ends with it.
		{path: script("tofu"), product: "OpenTofu"},
		{path: script("tofu-counting"), product: "OpenTofu"},
		{path: script("tofu-1.12.6"), product: "OpenTofu", version: "1.12.6"},
		{path: script("terraform_v1.5.7"), product: "Terraform", version: "1.5.7"},
		{path: script("terraform-1.6.0-beta1"), product: "Terraform", version: "1.6.0-beta1"},
		{path: script("engine-1.2.3")},
	} {
		product, version := engineIdentity(tt.path)
		if product != tt.product || version != tt.version {
			t.Errorf("%s: %q %q, want %q %q", filepath.Base(tt.path), product, version, tt.product, tt.version)
		}
	}
}

// A run naming no engine runs the runner's own; one naming a version gets
// it installed from its releases URL, verified with its key, once: the
// same version again, and the runner's own version, need no download. A
// version that does not verify, or that the source does not offer, is
// refused with its typed reason.
func TestEngineForInstalls(t *testing.T) {
	ctx := context.Background()
	terraform := terraformBinary(t)
	m := enginemirror.New(t, enginemirror.WithTerraform(terraform, "1.5.7", "1.4.6"), enginemirror.Tampered("terraform", "1.4.6"))
	s, err := NewServer(Options{Engine: enginePath, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []*runnerpb.EngineSpec{nil, {}} {
		if e, err := s.engineFor(ctx, spec); err != nil || e != s.engine {
			t.Fatalf("engineFor(%v) = %v, %v, want the runner's own", spec, e, err)
		}
	}
	spec := &runnerpb.EngineSpec{Name: "terraform", Version: "1.5.7", ReleasesUrl: m.URL("terraform"), SigningKey: m.SigningKey()}
	e, err := s.engineFor(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if e == s.engine || e.knownVersion() != "1.5.7" || e.product != "Terraform" {
		t.Fatalf("installed engine %s: %s %s", e.path, e.product, e.knownVersion())
	}
	downloads := m.Requests(enginemirror.ArchivePath("terraform", "1.5.7"))
	if again, err := s.engineFor(ctx, spec); err != nil || again != e {
		t.Fatalf("the same version again: %v, %v", again, err)
	}
	if got := m.Requests(enginemirror.ArchivePath("terraform", "1.5.7")); got != downloads || downloads != 1 {
		t.Fatalf("downloads of the archive: %d, then %d; want 1, then none", downloads, got)
	}

	_, err = s.engineFor(ctx, &runnerpb.EngineSpec{Name: "terraform", Version: "1.4.6", ReleasesUrl: m.URL("terraform"), SigningKey: m.SigningKey()})
	wantError(t, err, codes.FailedPrecondition, runner.ReasonEngineVerificationFailed)
	_, err = s.engineFor(ctx, &runnerpb.EngineSpec{Name: "terraform", Version: "1.3.0", ReleasesUrl: m.URL("terraform"), SigningKey: m.SigningKey()})
	wantError(t, err, codes.FailedPrecondition, runner.ReasonEngineUnavailable)
}

// A failed command is the engine's exit status and stderr, as plain text
// even where terraform-exec passes no -no-color.
func TestEngineResult(t *testing.T) {
	ctx := context.Background()
	exitErr := exec.Command("/bin/sh", "-c", "exit 3").Run()
	coloured := "\x1b[31m╷\x1b[0m\x1b[0m\n\x1b[31m│\x1b[0m \x1b[0m\x1b[1m\x1b[31mError: \x1b[0m\x1b[0m\x1b[1mFailed to write the imported state\x1b[0m\n\x1b[31m│\x1b[0m \x1b[0m\n\x1b[31m│\x1b[0m \x1b[0m\x1b[0mcannot import state with lineage \"x\"\n\x1b[31m╵\x1b[0m\x1b[0m\n"
	err := engineResult(ctx, fmt.Errorf("%w\n%s", exitErr, coloured))
	var exit *engineExit
	if !errors.As(err, &exit) || exit.code != 3 {
		t.Fatalf("got %#v", err)
	}
	if want := "\nError: Failed to write the imported state\n\ncannot import state with lineage \"x\"\n\n"; exit.stderr != want {
		t.Fatalf("stderr %q, want %q", exit.stderr, want)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := engineResult(cancelled, exitErr); !errors.Is(err, context.Canceled) {
		t.Fatalf("an interrupted command gave %v", err)
	}
}

// terraform-exec checks the engine's version before a handle's first
// command. The runner answers it for the engine when it knows the version
// (from the binary; here from its name), else lets the engine answer once,
// and answers every later handle's check: a handle is per module
// directory, so another tarball has a new one.
func TestEngineVersionChecks(t *testing.T) {
	t.Parallel()
	version := strings.TrimPrefix(engineFirstLine(t), "OpenTofu v")
	for _, tt := range []struct {
		name, binary string
		want         []string
	}{
		{name: "known", binary: "tofu-" + version,
			want: []string{"init", "plan", "show", "apply", "output", "init", "plan", "show"}},
		{name: "unknown", binary: "tofu-counting",
			want: []string{"version", "init", "plan", "show", "apply", "output", "init", "plan", "show"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 3*time.Minute)
			calls := filepath.Join(t.TempDir(), "calls")
			c := startRunnerWith(t, countingEngineNamed(t, calls, tt.binary)).client
			stateDir := t.TempDir()
			vars := map[string]any{"name": "v", "dir": t.TempDir()}
			tb := modulesTarball(t, 0)
			upload(t, ctx, c, workspaceSpec(t, tb, "basic", vars, stateDir), tb)
			plan, err := c.Plan(ctx, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Apply(ctx, plan.PlanFile, nil); err != nil {
				t.Fatal(err)
			}
			// Another tarball: another module directory.
			tb = modulesTarball(t, 1024)
			upload(t, ctx, c, workspaceSpec(t, tb, "basic", vars, stateDir), tb)
			plan, err = c.Plan(ctx, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := plan.Result.GetEngine(), "OpenTofu v"+version; got != want {
				t.Errorf("engine %q, want %q", got, want)
			}
			if got := strings.Fields(readFile(t, calls)); !slices.Equal(got, tt.want) {
				t.Errorf("the engine ran %v, want %v", got, tt.want)
			}
		})
	}
}

// An engine whose binary says neither what it is nor its version (a
// wrapper script) is named as its `version` names it: one process for
// terraform-exec's check, one for the name.
func TestEngineNamedByItsVersionText(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	calls := filepath.Join(t.TempDir(), "calls")
	c := startRunnerWith(t, countingEngineNamed(t, calls, "wrapped-engine")).client
	tb := modulesTarball(t, 0)
	upload(t, ctx, c, workspaceSpec(t, tb, "basic", map[string]any{"name": "w", "dir": t.TempDir()}, t.TempDir()), tb)
	plan, err := c.Plan(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := plan.Result.GetEngine(), engineFirstLine(t); got != want {
		t.Errorf("engine %q, want %q", got, want)
	}
	want := []string{"version", "init", "plan", "show", "version"}
	if got := strings.Fields(readFile(t, calls)); !slices.Equal(got, want) {
		t.Errorf("the engine ran %v, want %v", got, want)
	}
}

// A process an apply leaves behind holding the engine's stdout does not
// hold the run: the apply ends a moment after the engine, well before the
// interrupt grace (30 s here) and that process (300 s).
func TestBackgroundProcessHoldingTheOutput(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	c := startRunner(t).client
	pidfile := filepath.Join(t.TempDir(), "pid")
	tb := modulesTarball(t, 0)
	upload(t, ctx, c, workspaceSpec(t, tb, "background", map[string]any{"pidfile": pidfile}, t.TempDir()), tb)
	plan, err := c.Plan(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	_, err = c.Apply(ctx, plan.PlanFile, nil)
	took := time.Since(started)
	if pid, perr := strconv.Atoi(strings.TrimSpace(readFile(t, pidfile))); perr == nil {
		if alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		} else {
			t.Errorf("the background process %d was not running after the apply: the test proves nothing", pid)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if took > 20*time.Second {
		t.Fatalf("the apply took %s: it waited for the process holding the engine's output", took)
	}
}

// alive reports whether pid runs (a zombie has ended).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// The runner drives Terraform 1.5.7 (the last MPL release, which `make
// tools` installs as bin/terraform) through the same protocol as OpenTofu.
func TestTerraformEngine(t *testing.T) {
	t.Parallel()
	engine := terraformBinary(t)
	ctx := testContext(t, 3*time.Minute)
	c := startRunnerWith(t, engine).client
	stateDir, markerDir := t.TempDir(), t.TempDir()
	tb := modulesTarball(t, 0)
	upload(t, ctx, c, workspaceSpec(t, tb, "basic", map[string]any{"name": "tf", "dir": markerDir}, stateDir), tb)

	out, err := c.Plan(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Result.GetEngine(); got != "Terraform v1.5.7" {
		t.Fatalf("engine %q, want Terraform v1.5.7", got)
	}
	if out.Result.GetAdd() != 2 {
		t.Fatalf("add = %d, want 2", out.Result.GetAdd())
	}
	outs, err := c.Apply(ctx, out.PlanFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(markerDir, "marker.txt")); got != "tf" {
		t.Fatalf("marker %q, want tf", got)
	}
	if v := outputsByName(outs)["name"]; v == nil || string(v.GetValueJson()) != `"tf"` {
		t.Fatalf("output name = %v", v)
	}
	if err := c.Destroy(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(markerDir, "marker.txt")); !os.IsNotExist(err) {
		t.Fatalf("marker not destroyed: %v", err)
	}
}

// terraformBinary is Terraform 1.5.7: LANDFORM_TERRAFORM, else the
// repository's bin/terraform.
func terraformBinary(t *testing.T) string {
	t.Helper()
	return tool(t, "terraform", "LANDFORM_TERRAFORM")
}
