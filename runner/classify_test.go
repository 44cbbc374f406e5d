package runner

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
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

func TestClassify(t *testing.T) {
	tests := []struct {
		name     string
		text     string
		code     codes.Code
		reason   string
		metadata map[string]string
	}{
		{
			name: "state locked", text: lockedText, code: codes.Aborted, reason: ReasonStateLocked,
			metadata: map[string]string{
				"id": "2fa5fdd2-529c-edce-14ee-96a2a382d1b6", "path": "terraform.tfstate",
				"operation": "OperationTypeApply", "who": "root@vm",
				"created": "2026-11-22 00:59:04.767085189 +0000 UTC",
			},
		},
		{name: "stale plan", text: "Error: Saved plan is stale\n\nThe given plan file can no longer be applied", code: codes.FailedPrecondition, reason: ReasonStalePlan},
		{name: "missing variable", text: "Error: No value for required variable\n\n  on main.tf line 1:", code: codes.InvalidArgument, reason: ReasonMissingVariable},
		{
			name: "init configuration error, wrapped", code: codes.InvalidArgument, reason: ReasonInvalidConfiguration,
			text: "Error: OpenTofu encountered problems during initialization, including problems\nwith the configuration, described below.",
		},
		{name: "variable validation", text: "Error: Invalid value for variable\n\n  on main.tf line 3:", code: codes.InvalidArgument, reason: ReasonInvalidConfiguration},
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
