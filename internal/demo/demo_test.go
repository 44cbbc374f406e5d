package demo

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/landform-dev/landform/internal/devenv"
	"github.com/landform-dev/landform/internal/testenv"
)

// The walkthrough `make demo` runs, end to end, on a fresh embedded
// environment with the real Flux controllers: every step must pass and say
// what it checked, and the DSN must never be printed.
func TestWalkthrough(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	tools := os.Getenv("LANDFORM_TOOLS_DIR")
	if tools == "" {
		tools = filepath.Join(root, "bin")
	}
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env, err := devenv.Start(ctx, devenv.Options{StateDir: t.TempDir(), RepoDir: root, ToolsDir: tools, Progress: &progress})
	if err != nil {
		t.Fatalf("starting the embedded environment (run `make tools build` first): %v\n%s", err, progress.String())
	}
	defer func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping: %v", err)
		}
	}()

	var out bytes.Buffer
	if err := Run(ctx, Options{Env: env, Out: &out, StepTimeout: 4 * time.Minute}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	text := out.String()
	testenv.WantIn(t, "walkthrough output", text,
		"==> step 7/7",
		"never applied",
		"| **Plan `plan-",
		"| ~ | `landform_database.this` |",
		"nothing destroyed, the database still has 20 GB",
		"waits for approval: +2 ~0 -0",
		"Approved plan",
		"db_size_gb=20",
		"db size 20 GB",
		"| Outputs Secret: app-infra-outputs (",
		"substituted by Kustomization app",
		"| Terraform:      app-infra",
		"the cloud is empty again",
		"The walkthrough succeeded.",
	)
	if strings.Contains(text, "postgres://") {
		t.Errorf("the walkthrough printed a DSN:\n%s", text)
	}
}
