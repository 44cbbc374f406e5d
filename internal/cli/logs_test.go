package cli

import (
	"context"
	"errors"
	"strings"
	"testing"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/runlog"
)

// record writes one finished phase log as the controller does.
func record(t *testing.T, obj *v1alpha1.Terraform, phase runlog.Phase, runErr error, lines ...string) {
	t.Helper()
	rec := runlog.Start(context.Background(), env.Client, obj, phase)
	for _, l := range lines {
		rec.Line(l)
	}
	if err := rec.End(context.Background(), runErr); err != nil {
		t.Fatal(err)
	}
}

func TestLogs(t *testing.T) {
	ns := namespace(t, "logs")
	objs := fixtureStates(t, ns, "logs")
	record(t, objs[objReady], runlog.PhasePlan, nil,
		"tofu init", "Initializing the backend...", "tofu plan", "Plan: 3 to add, 0 to change, 0 to destroy.")
	record(t, objs[objReady], runlog.PhaseApply, nil,
		"terraform_data.database: Creating...", "terraform_data.database: Creation complete after 0s [id=cb2d4344]",
		"Apply complete! Resources: 3 added, 0 changed, 0 destroyed.")
	record(t, objs[objFailed], runlog.PhasePlan, errors.New("plan failed"),
		"tofu plan", "Error: Invalid reference", "  on main.tf line 3")

	for _, tt := range []struct {
		golden string
		args   []string
	}{
		{"logs/all-phases", []string{"logs", "-n", ns, objReady}},
		{"logs/one-phase", []string{"logs", "-n", ns, objReady, "--phase", "apply"}},
		{"logs/failed", []string{"logs", "-n", ns, objFailed}},
		{"logs/phase-never-run", []string{"logs", "-n", ns, objReady, "--phase", "destroy"}},
		{"logs/none", []string{"logs", "-n", ns, objNew}},
		{"logs/bad-phase", []string{"logs", "-n", ns, objReady, "--phase", "init"}},
		{"logs/not-found", []string{"logs", "-n", ns, "missing"}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			golden(t, tt.golden, normalize(run(t, "", tt.args...).transcript()))
		})
	}
}

// TestLogsFollow follows a running apply, its end, and the next run.
func TestLogsFollow(t *testing.T) {
	ns := namespace(t, "logs-follow")
	obj := terraform(t, ns, "database", states[objRunning])
	ctx := context.Background()

	apply := runlog.Start(ctx, env.Client, obj, runlog.PhaseApply)
	apply.Line("terraform_data.database: Creating...")
	cmd := start(t, "logs", "-n", ns, "database", "-f")
	cmd.waitOutput(t, func(s string) bool { return strings.Contains(s, "Creating...") })

	apply.Line("terraform_data.database: Still creating... [10s elapsed]")
	cmd.waitOutput(t, func(s string) bool { return strings.Contains(s, "Still creating") })
	apply.Line("terraform_data.database: Creation complete after 12s [id=cb2d4344]")
	if err := apply.End(ctx, nil); err != nil {
		t.Fatal(err)
	}
	cmd.waitOutput(t, func(s string) bool { return strings.Contains(s, "apply of logs-follow/database: succeeded") })

	plan := runlog.Start(ctx, env.Client, obj, runlog.PhasePlan)
	plan.Line("tofu plan")
	cmd.waitOutput(t, func(s string) bool { return strings.Contains(s, "tofu plan") })
	if err := plan.End(ctx, errors.New("failed")); err != nil {
		t.Fatal(err)
	}
	cmd.waitOutput(t, func(s string) bool { return strings.Contains(s, "plan of logs-follow/database: failed") })
	r := cmd.stop(t)
	if r.err != nil {
		t.Fatalf("logs -f ended with %v", r.err)
	}
	golden(t, "logs/follow", normalize(r.transcript()))
}

func TestNewText(t *testing.T) {
	long := strings.Repeat("x", 2000) + "\n"
	for _, tt := range []struct {
		name, old, cur, want string
	}{
		{"grown", "a\nb\n", "a\nb\nc\n", "c\n"},
		{"unchanged", "a\n", "a\n", ""},
		{"head dropped", "a\n" + long + "b\n", "[earlier output dropped]\n" + long + "b\nc\n", "c\n"},
		{"nothing in common", "a\nb\n", "[earlier output dropped]\nz\n", "[some output was dropped]\n[earlier output dropped]\nz\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := newText(tt.old, tt.cur); got != tt.want {
				t.Errorf("newText = %q, want %q", got, tt.want)
			}
		})
	}
}
