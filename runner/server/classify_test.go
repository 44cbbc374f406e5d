package server

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"

	"github.com/landform-dev/landform/runner"
)

const lockedText = `Error: Error acquiring the state lock

Error message: resource temporarily unavailable
Lock Info:
  ID:        2fa5fdd2-529c-edce-14ee-96a2a382d1b6
  Path:      terraform.tfstate
  Operation: OperationTypeApply
  Who:       root@vm
  Version:   1.12.6
  Created:   2026-11-22 00:59:04.767085189 +0000 UTC
  Info:      


OpenTofu acquires a state lock to protect the state from being written
by multiple users at the same time.`

// Real texts, as tofu 1.12.6 and terraform 1.5.7 print them with -no-color
// (see the diagnostics in internal/backend/local/backend_local.go,
// internal/command/apply.go and internal/plans/planfile/tfplan.go of
// OpenTofu).
const (
	inconsistentLockText = `Error: Inconsistent dependency lock file

The given plan file was created with a different set of external dependency
selections than the current configuration. A saved plan can be applied only
to the same configuration it was created from.

Create a new plan from the updated configuration.`
	// A plan made by terraform 1.5.7, applied by tofu.
	otherTofuVersionText = `Error: Failed to read plan from plan file

Cannot read the plan from the given plan file: plan file was created by
OpenTofu or Terraform 1.5.7, but this is 1.12.6; plan files cannot be
transferred between different versions of OpenTofu / Terraform.`
	// A plan made by tofu 1.12.6, applied by terraform 1.5.7.
	otherTerraformVersionText = `Error: Failed to read plan from plan file

Cannot read the plan from the given plan file: plan file was created by
Terraform 1.12.6, but this is 1.5.7; plan files cannot be transferred between
different Terraform versions.`
	stalePlanText = `Error: Saved plan is stale

The given plan file can no longer be applied because the state was changed
by another operation after the plan was created.`
	otherLineageText = `Error: Saved plan does not match the given state

The given plan file can not be applied because it was created from a
different state lineage.`
	checksumsText = `Error: Failed to install provider

Error while installing landform-dev/landform v0.1.0: the local package for
registry.opentofu.org/landform-dev/landform 0.1.0 doesn't match any of the
checksums previously recorded in the dependency lock file (this might be
because the available checksums are for packages targeting different
platforms); for more information:
https://opentofu.org/docs/language/files/dependency-lock/#checksum-verification`
	// Terraform before 1.5 given the runner's import blocks, at init and
	// at plan: HCL's text for a block its schema lacks (hclsyntax's
	// "Unsupported block type", the same Terraform 1.5.7 prints for any
	// unknown block).
	importInitText = `Terraform encountered problems during initialisation, including problems
with the configuration, described below.

The Terraform configuration must be valid before initialization so that
Terraform can determine which modules and providers need to be installed.

Error: Unsupported block type

  on landform_imports.tf line 3:
   3: import {

Blocks of type "import" are not expected here.`
	importPlanText = `Error: Unsupported block type

  on landform_imports.tf line 3:
   3: import {

Blocks of type "import" are not expected here.`
	// An import to an address the module does not have, by tofu 1.12.6
	// and terraform 1.5.7.
	importTargetTofuText = `Error: Configuration for import target does not exist

  on landform_imports.tf line 3:
   3: import {

The configuration for the given import terraform_data.nope does not exist.
All target instances must have an associated configuration to be imported.`
	importTargetTerraformText = `Error: Import block target does not exist

  on landform_imports.tf line 3:
   3: import {

The target for the given import block does not exist. If you wish to
automatically generate config for this resource, use the -generate-config-out
option within terraform plan. Otherwise, make sure the target resource exists
within your configuration. For example:

  terraform plan -generate-config-out=generated.tf`
	goneVersionText = `Error: Failed to resolve provider packages

Could not resolve provider landform-dev/landform: the previously-selected
version 0.2.0 is no longer available`
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name     string
		text     string
		code     codes.Code
		reason   string
		metadata map[string]string
	}{
		{
			name: "state locked", text: lockedText, code: codes.Aborted, reason: runner.ReasonStateLocked,
			metadata: map[string]string{
				"id": "2fa5fdd2-529c-edce-14ee-96a2a382d1b6", "path": "terraform.tfstate",
				"operation": "OperationTypeApply", "who": "root@vm",
				"created": "2026-11-22 00:59:04.767085189 +0000 UTC",
			},
		},
		{name: "stale plan", text: stalePlanText, code: codes.FailedPrecondition, reason: runner.ReasonStalePlan},
		{name: "inconsistent lock file", text: inconsistentLockText, code: codes.FailedPrecondition, reason: runner.ReasonPlanUnusable},
		{name: "plan from another tofu version", text: otherTofuVersionText, code: codes.FailedPrecondition, reason: runner.ReasonPlanUnusable},
		{name: "plan from another terraform version", text: otherTerraformVersionText, code: codes.FailedPrecondition, reason: runner.ReasonPlanUnusable},
		{name: "plan from another state lineage", text: otherLineageText, code: codes.FailedPrecondition, reason: runner.ReasonPlanUnusable},
		{name: "lock file checksums, outside an apply", text: checksumsText, code: codes.OK, reason: ""},
		{name: "import blocks at init, old engine", text: importInitText, code: codes.FailedPrecondition, reason: runner.ReasonImportUnsupported},
		{name: "import blocks at plan, old engine", text: importPlanText, code: codes.FailedPrecondition, reason: runner.ReasonImportUnsupported},
		{
			name: "another unsupported block", code: codes.OK, reason: "",
			text: "Error: Unsupported block type\n\n  on main.tf line 1:\n   1: import2 {\n\nBlocks of type \"import2\" are not expected here. Did you mean \"import\"?",
		},
		{name: "import target missing, tofu", text: importTargetTofuText, code: codes.InvalidArgument, reason: runner.ReasonInvalidConfiguration},
		{name: "import target missing, terraform", text: importTargetTerraformText, code: codes.InvalidArgument, reason: runner.ReasonInvalidConfiguration},
		{name: "missing variable", text: "Error: No value for required variable\n\n  on main.tf line 1:", code: codes.InvalidArgument, reason: runner.ReasonMissingVariable},
		{
			name: "init configuration error, wrapped", code: codes.InvalidArgument, reason: runner.ReasonInvalidConfiguration,
			text: "Error: OpenTofu encountered problems during initialization, including problems\nwith the configuration, described below.",
		},
		{name: "variable validation", text: "Error: Invalid value for variable\n\n  on main.tf line 3:", code: codes.InvalidArgument, reason: runner.ReasonInvalidConfiguration},
		{name: "variable of the wrong type", text: "Error: Invalid value for input variable\n\nThe given value is not suitable for var.replicas declared at main.tf:2,1-20:\na number is required.", code: codes.InvalidArgument, reason: runner.ReasonInvalidConfiguration},
		{name: "anything else", text: "Error: creating bucket: AccessDenied", code: codes.OK, reason: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, reason, md := classify(tt.text)
			if code != tt.code || reason != tt.reason {
				t.Fatalf("got %s %q, want %s %q", code, reason, tt.code, tt.reason)
			}
			if diff := cmp.Diff(tt.metadata, md); diff != "" {
				t.Fatalf("metadata (-want +got):\n%s", diff)
			}
		})
	}
}

// An apply's init that fails on the lock file its plan brought makes the
// plan unusable; any other init failure stays what it was.
func TestPlanLockUnusable(t *testing.T) {
	for _, text := range []string{checksumsText, goneVersionText} {
		err := planLockUnusable(newError(codes.Unknown, runner.ReasonTerraformFailed, "terraform init: "+text, nil))
		if e, _ := runner.AsError(err); e == nil || e.Code != codes.FailedPrecondition || e.Reason != runner.ReasonPlanUnusable {
			t.Fatalf("%q: got %v", text, err)
		}
	}
	for _, err := range []error{
		newError(codes.Unknown, runner.ReasonTerraformFailed, "terraform init: Error: Failed to query available provider packages: connection refused", nil),
		newError(codes.Unavailable, runner.ReasonInterrupted, "terraform was interrupted", nil),
	} {
		if got := planLockUnusable(err); got != err {
			t.Fatalf("%v became %v", err, got)
		}
	}
}

func TestRedact(t *testing.T) {
	tests := []struct {
		name, text string
		secrets    []string
		want       string
	}{
		{name: "plain", text: "Output: token is abc123", secrets: []string{"abc123"}, want: "Output: token is (redacted)"},
		{name: "wrapped over lines", text: "Output: my very\nsecret phrase", secrets: []string{"my very secret phrase"}, want: "Output: (redacted)"},
		{name: "regexp characters", text: "pw a.b*c(d", secrets: []string{"a.b*c(d"}, want: "pw (redacted)"},
		{name: "untouched", text: "nothing here", secrets: []string{"abc123"}, want: "nothing here"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := redact(tt.text, tt.secrets); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTerraformMessage(t *testing.T) {
	err := errString("exit status 1\nError: boom\n\n  on main.tf line 1:\n")
	if got := terraformMessage(err); got != "Error: boom\n\n  on main.tf line 1:" {
		t.Fatalf("got %q", got)
	}
	long := strings.Repeat("é", maxMessageBytes)
	got := trimMessage(long)
	if len(got) > maxMessageBytes+len("\n... (truncated)") || !strings.HasSuffix(got, "(truncated)") {
		t.Fatalf("trimmed to %d bytes", len(got))
	}
	if !strings.HasPrefix(got, "éé") || strings.ContainsRune(got, '\uFFFD') {
		t.Fatal("trimmed inside a character")
	}
}

type errString string

func (e errString) Error() string { return string(e) }
