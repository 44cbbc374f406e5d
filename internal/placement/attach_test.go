package placement

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/landform-dev/landform/runner"
)

// countedModule appends a line to var.effects on create, then sleeps: the
// number of lines is the number of creates that really ran.
var countedModule = map[string]string{"main.tf": `
variable "effects" { type = string }
resource "terraform_data" "this" {
  input = var.effects
  provisioner "local-exec" {
    command = "echo created >> ${var.effects} && sleep 5"
  }
}
output "effects" { value = terraform_data.this.output }
`}

// A controller that dies mid-apply leaves its runner Pod running: a new
// placer (another controller process) finds the Pod of the run, watches
// the run from its first line and collects its outputs. The create ran
// once, and stopping the run removes the Pod.
func TestAttachCollectsARunItDidNotStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := runnerNamespace(t, true)
	obj := newTerraform(t, ns, "attach", nil)
	effects := filepath.Join(t.TempDir(), "effects")

	// The first controller: plans on a Pod started for the plan run, and
	// starts the apply on the same runner.
	first, err := newPodPlacer().Start(ctx, obj, "run-plan")
	if err != nil {
		t.Fatal(err)
	}
	tb := moduleTarball(t, "", countedModule)
	if err := first.Client.UploadWorkspace(ctx, workspaceSpec(t, obj, tb, map[string]any{"effects": effects}), bytes.NewReader(tb.data)); err != nil {
		t.Fatal(err)
	}
	plan, err := runnerClient(first).Plan(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Client.StartRun(ctx, runner.RunSpec{ID: "run-apply", Action: runner.Apply, PlanFile: plan.PlanFile, LockFile: plan.LockFile}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the create to begin", func() bool {
		b, _ := os.ReadFile(effects)
		return len(b) > 0
	})
	// The first controller is gone: its connection with it.
	first.Client.Close()

	second, err := newPodPlacer().Attach(ctx, obj, "run-apply")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	res, err := second.Client.WatchRun(ctx, "run-apply", 0, func(_ int64, line string) { lines = append(lines, line) })
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(lines, "\n"), "Apply complete!") {
		t.Fatalf("collected log:\n%s", strings.Join(lines, "\n"))
	}
	if len(res.Outputs) != 1 || res.Outputs[0].GetName() != "effects" {
		t.Fatalf("outputs %v", res.Outputs)
	}
	if b, _ := os.ReadFile(effects); strings.Count(string(b), "created") != 1 {
		t.Fatalf("the create ran %d times, want once", strings.Count(string(b), "created"))
	}
	if err := second.Stop(); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the runner Pod to be gone", func() bool { return len(allPods(t, ns)) == 0 })

	// With no runner Pod left, the run's runner is gone.
	_, err = newPodPlacer().Attach(ctx, obj, "run-apply")
	if !errors.Is(err, ErrRunnerGone) {
		t.Fatalf("attach without a Pod: %v, want ErrRunnerGone", err)
	}
}
