package server

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/landform-dev/landform/runner"
)

// countingEngine is a wrapper around the real engine that appends each
// subcommand it runs to calls. Its name starts with "tofu", so the runner
// still takes it for OpenTofu; being a script, it hides the engine's
// version from the runner.
func countingEngine(t *testing.T, calls string) string {
	t.Helper()
	return countingEngineNamed(t, calls, "tofu-counting")
}

// countingEngineNamed is countingEngine as name, e.g. tofu-1.12.6: a name
// that tells the runner the version.
func countingEngineNamed(t *testing.T, calls, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	script := fmt.Sprintf("#!/bin/sh\necho \"$1\" >> %q\nexec %q \"$@\"\n", calls, enginePath)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// After an apply the runner reads the outputs from the state Secret the
// engine has just written: no `output` process, and one `version` process
// for the plan and the apply together. An encrypted state
// (OpenTofu's state encryption), which it cannot read, is read by the
// engine; its outputs are never taken for none.
func TestApplyReadsTheOutputs(t *testing.T) {
	for _, tt := range []struct {
		module      string
		engineReads bool
	}{
		{module: "outputs", engineReads: false},
		{module: "encrypted", engineReads: true},
	} {
		t.Run(tt.module, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 3*time.Minute)
			k := newKubeState(t, tt.module)
			calls := filepath.Join(t.TempDir(), "calls")
			r := startRunnerWith(t, countingEngine(t, calls))
			// The encrypted module is the outputs module with encryption.tf.
			tb := encryptedTarball(t, "outputs")
			upload(t, ctx, r.client, k.useBackend(workspaceSpec(t, tb, tt.module, nil, "")), tb)
			plan := planFor(t, ctx, r.client)

			id := startRun(t, ctx, r.client, runner.RunSpec{Action: runner.Apply, PlanFile: plan.PlanFile, LockFile: plan.LockFile})
			res, err := r.client.WatchRun(ctx, id, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := outputsByName(res.Outputs)
			for name, want := range map[string]struct {
				value, typ string
				sensitive  bool
			}{
				"name":     {`"db"`, `"string"`, false},
				"settings": {`{"name":"db","port":5432}`, `["object",{"name":"string","port":"number"}]`, false},
				"dsn":      {`"postgres://app:s3cr3t-dsn@db:5432/app"`, `"string"`, true},
			} {
				o := got[name]
				if o == nil {
					t.Fatalf("output %s missing from %v", name, res.Outputs)
				}
				if compactJSON(t, o.ValueJson) != want.value || compactJSON(t, o.TypeJson) != want.typ || o.Sensitive != want.sensitive {
					t.Errorf("output %s = %s (type %s, sensitive %v), want %s (type %s, sensitive %v)",
						name, o.ValueJson, o.TypeJson, o.Sensitive, want.value, want.typ, want.sensitive)
				}
			}
			if len(res.Outputs) != 3 {
				t.Errorf("%d outputs, want 3", len(res.Outputs))
			}
			// One process per step, and one `version` before the first:
			// terraform-exec checks the version of the engine it runs, and
			// this one's the runner cannot tell beforehand (a script
			// named without it; TestEngineVersionChecks). The apply runs
			// on the plan's handle, whose check holds. No `output` for a
			// plain state.
			want := []string{"version", "init", "plan", "show", "apply"}
			if tt.engineReads {
				want = append(want, "output")
			}
			if subcommands := strings.Fields(readFile(t, calls)); !slices.Equal(subcommands, want) {
				t.Errorf("the engine ran %v, want %v", subcommands, want)
			}
		})
	}
}
