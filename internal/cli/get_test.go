package cli

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/testenv"
)

// objectMeta hides what the API server assigns.
var objectMeta = regexp.MustCompile(`("?(uid|resourceVersion)"?: )"?[0-9a-f-]+"?`)

func TestGet(t *testing.T) {
	ns := namespace(t, "get")
	other := namespace(t, "get-other")
	namespace(t, "get-empty")
	fixtureStates(t, ns, "get")
	terraform(t, other, "network", func(obj *v1alpha1.Terraform) {
		obj.Labels = map[string]string{"set": "get"}
		applied(obj)
	})

	for _, tt := range []struct {
		golden string
		args   []string
	}{
		{"get/namespace", []string{"get", "-n", ns}},
		{"get/one", []string{"get", "-n", ns, objPending}},
		{"get/all-namespaces", []string{"get", "-A", "-l", "set=get"}},
		{"get/label-selector", []string{"get", "-A", "--label-selector", "set=get"}},
		{"get/empty", []string{"get", "-n", "get-empty"}},
		{"get/not-found", []string{"get", "-n", ns, "missing"}},
		{"get/yaml", []string{"get", "-n", ns, objPending, "-o", "yaml"}},
		{"get/json-list", []string{"get", "-n", other, "-o", "json"}},
		{"get/bad-output", []string{"get", "-n", ns, "-o", "wide"}},
		{"get/name-and-all", []string{"get", "-A", objPending}},
		{"get/not-ready", []string{"get", "-n", ns, "--status-selector", "ready=false"}},
		{"get/not-ready-true", []string{"get", "-n", ns, "--status-selector", "Ready!=True", "--no-header"}},
		{"get/reconciling", []string{"get", "-n", ns, "--status-selector", "reconciling=true", "-o", "yaml"}},
		{"get/status-selector-none", []string{"get", "-A", "-l", "set=get", "--status-selector", "stalled=true"}},
		{"get/status-selector-bad", []string{"get", "-n", ns, "--status-selector", "ready"}},
		{"get/status-selector-bad-status", []string{"get", "-n", ns, "--status-selector", "ready=yes"}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			r := run(t, "", tt.args...)
			golden(t, tt.golden, objectMeta.ReplaceAllString(normalize(r.transcript()), "${1}X"))
		})
	}
}

// TestGetWatch checks that -w prints a row for each change, aligned with
// the header.
func TestGetWatch(t *testing.T) {
	ns := namespace(t, "get-watch")
	obj := terraform(t, ns, "database", states[objRunning])

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut testenv.SyncBuffer
	done := make(chan error)
	go func() {
		done <- Execute(ctx, Options{
			Streams: streams(&out, &errOut),
			Now:     func() time.Time { return now },
		}, []string{"--kubeconfig", kubeconfig(t), "get", "-n", ns, "-w"})
	}()
	waitFor(t, &out, func(s string) bool { return lines(s) == 2 })

	setCondition(obj, condition(meta.ReadyCondition, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, "no changes", 0))
	obj.Status.Conditions = removeCondition(obj.Status.Conditions, meta.ReconcilingCondition)
	obj.Status.Plan = &v1alpha1.PlanStatus{ID: "plan-2222222222-0000000000", Revision: rev2, PlannedAt: ago(0)}
	if err := env.Client.Status().Update(ctx, obj); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &out, func(s string) bool { return strings.Contains(s, "no changes") })
	if err := env.Client.Delete(ctx, obj); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &out, func(s string) bool { return lines(s) == 4 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("get -w ended with %v", err)
	}
	golden(t, "get/watch", out.String()+errOut.String())
}

func removeCondition(cs []metav1.Condition, typ string) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range cs {
		if c.Type != typ {
			out = append(out, c)
		}
	}
	return out
}

// waitFor waits until the output satisfies ok.
func waitFor(t *testing.T, out *testenv.SyncBuffer, ok func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok(out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out; output so far:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
