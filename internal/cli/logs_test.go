package cli

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
		{"logs/tail", []string{"logs", "-n", ns, objReady, "--tail", "1"}},
		{"logs/tail-zero", []string{"logs", "-n", ns, objFailed, "--tail", "0"}},
		{"logs/bad-tail", []string{"logs", "-n", ns, objReady, "--tail", "-2"}},
		{"logs/bad-since", []string{"logs", "-n", ns, objReady, "--since", "-1h"}},
		{"logs/json", []string{"logs", "-n", ns, objReady, "--tail", "1", "-o", "json"}},
		{"logs/json-follow", []string{"logs", "-n", ns, objReady, "-f", "-o", "json"}},
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

// backdate moves the times of obj's last run of phase d back, as if it
// had run d earlier: the annotations runlog writes them in.
func backdate(t *testing.T, obj *v1alpha1.Terraform, phase runlog.Phase, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	var s corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: runlog.SecretName(obj.Name)}, &s); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"started-at", "finished-at"} {
		ann := "infra.landform.dev/" + string(phase) + "-" + key
		at, err := time.Parse(time.RFC3339, s.Annotations[ann])
		if err != nil {
			t.Fatalf("annotation %s: %v", ann, err)
		}
		s.Annotations[ann] = at.Add(-d).Format(time.RFC3339)
	}
	if err := env.Client.Update(ctx, &s); err != nil {
		t.Fatal(err)
	}
}

// TestLogsSinceTail: --since keeps the runs that ended within it, and a
// later run of a phase left out; --tail the last lines of what is kept,
// then with -f everything new.
func TestLogsSinceTail(t *testing.T) {
	ns := namespace(t, "logs-since")
	ctx := context.Background()
	obj := terraform(t, ns, "database", states[objReady])
	// The CLI's clock is an hour ahead: these runs ended an hour ago, the
	// plan three hours ago.
	record(t, obj, runlog.PhasePlan, nil, "tofu plan", "Plan: 1 to add, 0 to change, 0 to destroy.")
	backdate(t, obj, runlog.PhasePlan, 2*time.Hour)
	record(t, obj, runlog.PhaseApply, nil, "terraform_data.database: Creating...", "Apply complete! Resources: 1 added, 0 changed, 0 destroyed.")

	r := run(t, "", "logs", "-n", ns, "database", "--since", "2h")
	golden(t, "logs/since", normalize(r.transcript()))
	if strings.Contains(r.stdout, "tofu plan") || !strings.Contains(r.stdout, "Apply complete!") {
		t.Errorf("--since 2h printed the plan of three hours ago, or not the apply of one hour ago:\n%s", r.stdout)
	}
	golden(t, "logs/since-none", normalize(run(t, "", "logs", "-n", ns, "database", "--since", "30m").transcript()))
	golden(t, "logs/since-phase", normalize(run(t, "", "logs", "-n", ns, "database", "--since", "2h", "--phase", "plan").transcript()))

	// -f: the apply's last line; the old plan stays out, but the plan
	// run that starts later is printed whole, as it runs.
	cmd := start(t, "logs", "-n", ns, "database", "--since", "2h", "--tail", "1", "-f")
	cmd.waitOutput(t, func(s string) bool { return strings.Contains(s, "Apply complete!") })
	plan := runlog.Start(ctx, env.Client, obj, runlog.PhasePlan)
	plan.Line("tofu init")
	plan.Line("tofu plan")
	cmd.waitOutput(t, func(s string) bool { return strings.Contains(s, "tofu plan") })
	if err := plan.End(ctx, nil); err != nil {
		t.Fatal(err)
	}
	cmd.waitOutput(t, func(s string) bool { return strings.Contains(s, "plan of logs-since/database: succeeded") })
	r = cmd.stop(t)
	if r.err != nil {
		t.Fatalf("logs -f ended with %v", r.err)
	}
	golden(t, "logs/since-tail-follow", normalize(r.transcript()))
	if strings.Contains(r.stdout, "Creating...") || strings.Contains(r.stdout, "Plan: 1 to add") {
		t.Errorf("-f --tail 1 printed more than the apply's last line, or the old plan:\n%s", r.stdout)
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		2 * time.Hour: "2h", 90 * time.Minute: "1h30m", 30 * time.Minute: "30m", 45 * time.Second: "45s",
		time.Hour + time.Second: "1h0m1s", -time.Hour: "-1h", 1500 * time.Millisecond: "1.5s",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestLastLines(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"a\nb\nc\n", -1, "a\nb\nc\n"},
		{"a\nb\nc\n", 0, ""},
		{"a\nb\nc\n", 1, "c\n"},
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc\n", 3, "a\nb\nc\n"},
		{"a\nb\nc\n", 9, "a\nb\nc\n"},
		{"a\nb", 1, "b"},
		{"", 1, ""},
	} {
		if got := lastLines(tt.s, tt.n); got != tt.want {
			t.Errorf("lastLines(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}
