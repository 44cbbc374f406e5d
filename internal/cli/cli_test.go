package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/landform-dev/landform/internal/testenv"
)

func TestDisplayNameFor(t *testing.T) {
	for base, want := range map[string]string{
		"landform":         "landform",
		"kubectl-landform": "kubectl landform",
		"flux-landform":    "flux landform",
		"landform-dev":     "landform",
	} {
		if got := DisplayNameFor(base); got != want {
			t.Errorf("DisplayNameFor(%q) = %q, want %q", base, got, want)
		}
	}
}

// TestKubectlPlugin checks that help and hints name `kubectl landform`
// when the binary runs as the kubectl plugin.
func TestKubectlPlugin(t *testing.T) {
	var out, errOut bytes.Buffer
	err := Execute(context.Background(), Options{Streams: streams(&out, &errOut), DisplayName: DisplayNameFor("kubectl-landform")},
		[]string{"approve", "--help"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WantIn(t, "help", out.String(), "Usage:\n  kubectl landform approve NAME [flags]", "kubectl landform approve database --plan")

	ns := namespace(t, "plugin")
	terraform(t, ns, objSuspended, states[objSuspended])
	out.Reset()
	err = Execute(context.Background(), Options{Streams: streams(&out, &errOut), DisplayName: "kubectl landform"},
		[]string{"--kubeconfig", kubeconfig(t), "replan", "-n", ns, objSuspended})
	if err == nil || !strings.Contains(err.Error(), "kubectl landform resume "+objSuspended) {
		t.Errorf("error %v does not name the plugin's command", err)
	}
}

func TestCompletion(t *testing.T) {
	ns := namespace(t, "completion")
	terraform(t, ns, "database", nil)
	terraform(t, ns, "network", nil)
	terraform(t, ns, "dns", nil)

	for _, tt := range []struct {
		golden string
		args   []string
	}{
		// What the shell scripts ask for when completing NAME.
		{"completion/names", []string{"__complete", "approve", "-n", ns, ""}},
		{"completion/prefix", []string{"__complete", "logs", "-n", ns, "d"}},
		{"completion/phase", []string{"__complete", "logs", "-n", ns, "database", "--phase", ""}},
		// Commands that take several names offer those not named yet.
		{"completion/more-names", []string{"__complete", "suspend", "-n", ns, "database", ""}},
		{"completion/until", []string{"__complete", "reconcile", "-n", ns, "database", "--until", ""}},
		// -n and --context, as kubectl and flux complete them.
		{"completion/namespace", []string{"__complete", "get", "-n", "completio"}},
		{"completion/context", []string{"__complete", "get", "--context", ""}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			golden(t, tt.golden, run(t, "", tt.args...).transcript())
		})
	}
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		r := run(t, "", "completion", shell)
		if r.err != nil || !strings.Contains(r.stdout, "landform") {
			t.Errorf("completion %s: %v\n%.200s", shell, r.err, r.stdout)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		golden string
		args   []string
	}{
		{"errors/no-name", []string{"approve"}},
		{"errors/two-names", []string{"unlock", "a", "b"}},
		{"errors/unknown-flag", []string{"get", "--bogus"}},
		{"errors/unknown-command", []string{"destroy", "database"}},
		{"errors/misspelt-command", []string{"aprove", "database"}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			golden(t, tt.golden, run(t, "", tt.args...).transcript())
		})
	}
}
