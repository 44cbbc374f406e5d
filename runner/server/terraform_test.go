package server

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The runner drives Terraform 1.5.7 (the last MPL release, which `make
// tools` installs as bin/terraform) through the same protocol as OpenTofu.
func TestTerraformEngine(t *testing.T) {
	t.Parallel()
	engine := terraformBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
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
	engine := os.Getenv("LANDFORM_TERRAFORM")
	if engine == "" {
		engine = filepath.Join("..", "..", "bin", "terraform")
	}
	if _, err := os.Stat(engine); err != nil {
		t.Fatalf("Terraform engine %s missing: run `make tools` (%v)", engine, err)
	}
	return engine
}
