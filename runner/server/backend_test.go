package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/landform-dev/landform/runner"
)

// TestDefaultBackend checks the kubernetes backend override and that
// backend_config reaches init: pointed at an API server that is not there,
// init fails trying to reach it, and that is a retryable failure, not a
// configuration error. (The kubernetes backend against a real API server is
// covered by the controller's envtest suites.)
func TestDefaultBackend(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := startRunner(t)
	tb := modulesTarball(t, 0)

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: nowhere
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: nowhere
  context:
    cluster: nowhere
    user: nobody
current-context: nowhere
users:
- name: nobody
  user:
    token: not-a-token
`), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := workspaceSpec(t, tb, "basic", map[string]any{"name": "k", "dir": t.TempDir()}, "")
	spec.CustomBackend = ""
	spec.BackendConfig = map[string]string{
		"secret_suffix": "basic",
		"namespace":     "default",
		"config_path":   kubeconfig,
	}
	upload(t, ctx, r.client, spec, tb)
	override := readFile(t, filepath.Join(r.server.currentRoot(), "basic", BackendOverrideFile))
	if override != defaultBackend {
		t.Fatalf("backend override:\n%s", override)
	}

	_, err := r.client.Plan(ctx, false, nil)
	e := wantError(t, err, codes.Unknown, runner.ReasonTerraformFailed)
	if !strings.Contains(e.Message, "127.0.0.1:1") {
		t.Fatalf("init did not use the backend config: %s", e.Message)
	}
}
