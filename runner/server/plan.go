package server

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/landform-dev/landform/runner"
)

// lockFileName is terraform's dependency lock file, in the module dir.
const lockFileName = ".terraform.lock.hcl"

// plan plans (the destruction of everything when destroy is set) and
// returns the plan file, the JSON plan, the human plan, the dependency lock
// file it was made with, and its summary. planned is called once the plan
// file is written.
func (s *Server) plan(ctx context.Context, ws *workspace, destroy, locked bool, logf func(string), planned func()) (*runner.PlanOutput, error) {
	planFile, err := os.CreateTemp(s.tmpDir, "plan-*.tfplan")
	if err != nil {
		return nil, internalError("create plan file", err)
	}
	planPath := planFile.Name()
	planFile.Close()
	defer os.Remove(planPath)

	// The plan's own output is the human plan: no `show` of the plan
	// file (ShowPlanFileRaw) is needed for it, nor its process.
	var printed strings.Builder
	detach := attachLogsKeeping(ws.tf, logf, &printed)
	hasChanges, err := ws.tf.Plan(ctx, tfexec.Out(planPath), tfexec.Destroy(destroy), tfexec.Lock(!locked), tfexec.LockTimeout("0s"))
	detach()
	if err = engineResult(ctx, err); err != nil {
		return nil, s.terraformError(ctx, ws, "plan", err, true)
	}
	planned()

	planBytes, err := os.ReadFile(planPath)
	if err != nil {
		return nil, internalError("read plan file", err)
	}
	jsonPlan, err := showPlanJSON(ctx, ws, planPath)
	if err != nil {
		return nil, s.terraformError(ctx, ws, "show -json", err, false)
	}
	humanPlan := planText(printed.String())
	decoded, err := decodePlan(jsonPlan)
	if err != nil {
		return nil, internalError("summarize plan", err)
	}
	result, err := decoded.summary()
	if err != nil {
		return nil, internalError("summarize plan", err)
	}
	// OpenTofu and Terraform 1.5.7 report an import-only plan as one with
	// changes; the count makes sure of it: such a plan must be applied.
	result.HasChanges = hasChanges || result.ImportCount > 0
	if result.Engine, err = ws.engine.displayName(ctx, ws, decoded.TerraformVersion); err != nil {
		s.log.Info("engine version unknown", "error", err.Error())
	}
	lockFile, err := os.ReadFile(filepath.Join(ws.moduleDir, lockFileName))
	if err != nil && !os.IsNotExist(err) {
		return nil, internalError("read the dependency lock file", err)
	}
	return &runner.PlanOutput{Result: result, PlanFile: planBytes, JSONPlan: jsonPlan, HumanPlan: []byte(humanPlan), LockFile: lockFile}, nil
}

// showPlanJSON returns `show -json` of a plan file as the engine printed
// it: terraform-exec decodes and checks it (ShowPlanFile), and the bytes,
// whose numbers and fields the controller keeps exactly, are taken on the
// way.
func showPlanJSON(ctx context.Context, ws *workspace, planPath string) ([]byte, error) {
	var out bytes.Buffer
	ws.tf.SetStdout(&out)
	_, err := ws.tf.ShowPlanFile(ctx, planPath)
	ws.tf.SetStdout(nil)
	if err = engineResult(ctx, err); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// planText is what plan printed, less its closing advice (the rule, "Saved
// the plan to: <a temporary path>", and how to apply it), which says
// nothing about the changes.
func planText(printed string) string {
	lines := strings.Split(printed, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "Saved the plan to:") {
			lines = lines[:i]
			break
		}
	}
	for len(lines) > 0 && isRuleOrBlank(lines[len(lines)-1]) {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n") + "\n"
}

// isRuleOrBlank reports whether line is empty or terraform's horizontal rule.
func isRuleOrBlank(line string) bool {
	return strings.Trim(line, "─ \t") == ""
}
