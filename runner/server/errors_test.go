package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/landform-dev/landform/runner"
)

func TestUploadRefusals(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 2*time.Minute)
	r := startRunner(t)
	tb := modulesTarball(t, 0)
	stateDir := t.TempDir()
	vars := map[string]any{"name": "x", "dir": t.TempDir()}

	// A good workspace first: refused uploads must leave it in place.
	upload(t, ctx, r.client, workspaceSpec(t, tb, "basic", vars, stateDir), tb)
	root := r.server.currentRoot()

	t.Run("digest mismatch", func(t *testing.T) {
		other := sha256.Sum256([]byte("something else"))
		spec := workspaceSpec(t, tb, "basic", vars, stateDir)
		spec.TarballDigest = "sha256:" + hex.EncodeToString(other[:])
		err := r.client.UploadWorkspace(ctx, spec, bytes.NewReader(tb.data))
		e := wantError(t, err, codes.InvalidArgument, runner.ReasonDigestMismatch)
		if e.Metadata["actual"] != tb.digest {
			t.Fatalf("metadata %v, want actual %s", e.Metadata, tb.digest)
		}
	})

	t.Run("truncated tarball", func(t *testing.T) {
		// The digest of a whole new tarball, half of its bytes: as when
		// a download is cut short.
		fresh := modulesTarball(t, 1)
		spec := workspaceSpec(t, fresh, "basic", vars, stateDir)
		spec.TarballSize = 0
		err := r.client.UploadWorkspace(ctx, spec, bytes.NewReader(fresh.data[:len(fresh.data)/2]))
		wantError(t, err, codes.InvalidArgument, runner.ReasonDigestMismatch)
	})

	for _, path := range []string{"../outside", "basic/../../outside", "/etc", "missing", "basic/main.tf"} {
		t.Run("path "+path, func(t *testing.T) {
			// A fresh digest, so that a path that only extraction can
			// check (missing, a file) is checked after a real transfer.
			fresh := modulesTarball(t, 1)
			err := r.client.UploadWorkspace(ctx, workspaceSpec(t, fresh, path, vars, stateDir), bytes.NewReader(fresh.data))
			wantError(t, err, codes.InvalidArgument, runner.ReasonInvalidPath)
		})
	}

	t.Run("TF_VAR in env", func(t *testing.T) {
		spec := workspaceSpec(t, tb, "basic", vars, stateDir)
		spec.Env = map[string]string{"TF_VAR_name": "very-secret-value"}
		err := r.client.UploadWorkspace(ctx, spec, bytes.NewReader(tb.data))
		e := wantError(t, err, codes.InvalidArgument, runner.ReasonInvalidConfiguration)
		if strings.Contains(e.Message, "very-secret-value") || !strings.Contains(e.Message, "TF_VAR_name") {
			t.Fatalf("message %q", e.Message)
		}
	})

	if got := r.server.currentRoot(); got != root {
		t.Fatalf("a refused upload replaced the workspace: %s, was %s", got, root)
	}
	entries, err := os.ReadDir(r.server.workDir)
	if err != nil {
		t.Fatal(err)
	}
	var srcDirs []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "src-") {
			srcDirs = append(srcDirs, e.Name())
		}
	}
	if len(srcDirs) != 1 || filepath.Join(r.server.workDir, srcDirs[0]) != root {
		t.Fatalf("refused uploads left source dirs behind: %v", srcDirs)
	}
	if tmp, _ := os.ReadDir(r.server.tmpDir); len(tmp) != 0 {
		t.Fatalf("temp files left behind: %v", tmp)
	}
}

func TestTerraformFailures(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	r := startRunner(t)
	tb := modulesTarball(t, 0)

	for _, tt := range []struct {
		name, module string
		vars         map[string]any
		reason       string
		// message is in the error: the file or the variable to fix.
		message string
	}{
		{name: "invalid HCL", module: "invalid", reason: runner.ReasonInvalidConfiguration, message: "main.tf"},
		{name: "undeclared reference", module: "badref", reason: runner.ReasonInvalidConfiguration},
		{name: "missing variable", module: "basic", vars: map[string]any{"dir": t.TempDir()}, reason: runner.ReasonMissingVariable, message: `"name"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			upload(t, ctx, r.client, workspaceSpec(t, tb, tt.module, tt.vars, t.TempDir()), tb)
			_, err := r.client.Plan(ctx, false, nil)
			e := wantError(t, err, codes.InvalidArgument, tt.reason)
			if !strings.Contains(e.Message, tt.message) {
				t.Fatalf("message does not say %q: %s", tt.message, e.Message)
			}
		})
	}

	t.Run("failure keeps env values out of the message", func(t *testing.T) {
		spec := workspaceSpec(t, tb, "failing", nil, t.TempDir())
		spec.Env = map[string]string{"LANDFORM_TEST_TOKEN": "tok-0123456789"}
		upload(t, ctx, r.client, spec, tb)
		plan, err := r.client.Plan(ctx, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		l := newLogs()
		_, err = r.client.Apply(ctx, plan.PlanFile, l.add)
		e := wantError(t, err, codes.Unknown, runner.ReasonTerraformFailed)
		// The provisioner really saw the value: it is in terraform's log.
		if !strings.Contains(l.text(), "token is tok-0123456789") {
			t.Fatalf("env not passed to terraform; logs:\n%s", l.text())
		}
		if strings.Contains(e.Message, "tok-0123456789") || !strings.Contains(e.Message, "(redacted)") {
			t.Fatalf("message not redacted: %s", e.Message)
		}
	})
}

func TestStalePlan(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	r := startRunner(t)
	tb := modulesTarball(t, 0)
	markerDir := t.TempDir()
	upload(t, ctx, r.client, workspaceSpec(t, tb, "basic", map[string]any{"name": "one", "dir": markerDir}, t.TempDir()), tb)

	old, err := r.client.Plan(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	current, err := r.client.Plan(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.Apply(ctx, current.PlanFile, nil); err != nil {
		t.Fatal(err)
	}
	_, err = r.client.Apply(ctx, old.PlanFile, nil)
	wantError(t, err, codes.FailedPrecondition, runner.ReasonStalePlan)
	if got := readFile(t, filepath.Join(markerDir, "marker.txt")); got != "one" {
		t.Fatalf("marker %q", got)
	}
}
