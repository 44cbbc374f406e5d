package server

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestPlanTextDropsTheApplyAdvice(t *testing.T) {
	printed := `terraform_data.x: Refreshing state... [id=1]

OpenTofu will perform the following actions:

  # terraform_data.x will be created
  + resource "terraform_data" "x" {}

Plan: 1 to add, 0 to change, 0 to destroy.

─────────────────────────────────────────────────────────────────────────────

Saved the plan to: /tmp/plan-123.tfplan

To perform exactly these actions, run the following command to apply:
    tofu apply "/tmp/plan-123.tfplan"
`
	want := `terraform_data.x: Refreshing state... [id=1]

OpenTofu will perform the following actions:

  # terraform_data.x will be created
  + resource "terraform_data" "x" {}

Plan: 1 to add, 0 to change, 0 to destroy.
`
	if got := planText(printed); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	noChanges := "No changes. Your infrastructure matches the configuration.\n\nOpenTofu has compared your real infrastructure against your configuration and\nfound no differences, so no changes are needed.\n"
	if got := planText(noChanges); got != noChanges {
		t.Fatalf("a plan without the advice changed:\n%s", got)
	}
}

func TestEngineProductFromTheBinaryName(t *testing.T) {
	for binary, want := range map[string]string{
		"/usr/local/bin/tofu":      "OpenTofu",
		"/opt/tofu-1.12.6":         "OpenTofu",
		"bin/terraform":            "Terraform",
		"/tmp/engine-wrapper.sh":   "",
		"/usr/bin/my-terraform-v1": "",
	} {
		if got := engineProduct(binary); got != want {
			t.Errorf("engineProduct(%q) = %q, want %q", binary, got, want)
		}
	}
}

// engineFirstLine is the first line of the test engine's `version`.
func engineFirstLine(t *testing.T) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "empty.tfrc")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(enginePath, "version")
	// A missing CLI configuration would put a warning first.
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+cfg, "CHECKPOINT_DISABLE=1", "TF_CLI_ARGS=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}
