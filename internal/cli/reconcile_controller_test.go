package cli

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/testenv"
)

// realLabel marks the objects the real controller of
// TestReconcileWithTheController reconciles (--watch-label-selector): the
// other tests' objects carry statuses they wrote themselves.
const realLabel = "cli-test.landform.dev/controller"

// TestReconcileWithTheController runs reconcile and approve against the
// real landform-controller with local runners and OpenTofu: the statuses
// the CLI judges are the controller's own, not the ones the other tests
// write.
func TestReconcileWithTheController(t *testing.T) {
	var p testenv.Programs
	if err := p.Find(); err != nil {
		if testenv.Skippable(err) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	artifacts, err := testenv.StartArtifacts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(artifacts.Close)
	ns := namespace(t, "reconcile-real")
	ctx := context.Background()
	module := map[string]string{"main.tf": `
variable "size" { type = number }
resource "terraform_data" "database" { input = var.size }
output "size" { value = terraform_data.database.output }
`}
	if _, err := artifacts.Publish(ctx, env.Client, ns, module); err != nil {
		t.Fatal(err)
	}
	testenv.StartController(t, testenv.ControllerOptions{
		Binary: p.Controller, Kubeconfig: kubeconfig(t), Runner: "local", RunnerBinary: p.Runner, Engine: p.Tofu,
		WorkDir: t.TempDir(), Args: []string{"--watch-label-selector=" + realLabel},
	})
	obj := &v1alpha1.Terraform{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "database", Labels: map[string]string{realLabel: "true"}},
		Spec: v1alpha1.TerraformSpec{
			SourceRef:     v1alpha1.SourceReference{Kind: sourcev1.GitRepositoryKind, Name: "repo"},
			Path:          "./",
			Interval:      metav1.Duration{Duration: time.Hour},
			RetryInterval: &metav1.Duration{Duration: 2 * time.Second},
			Vars:          []v1alpha1.Variable{{Name: "size", Value: testenv.JSONValue(10)}},
		},
	}
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}

	// The first plan waits for approval: --until=planned ends there, with 2.
	r := run(t, "", "reconcile", "-n", ns, "database", "--until=planned", "--timeout=2m", "-o", "json")
	if code := ExitCode(r.err); code != ExitPending {
		t.Fatalf("reconcile --until=planned: exit %d, want %d\n%s", code, ExitPending, r.transcript())
	}
	var res reconcileResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if res.Result != verdictApproval || res.Plan == nil || !res.Plan.Pending || res.Plan.Add != 1 {
		t.Fatalf("result %+v, plan %+v; want a pending plan adding one resource", res, res.Plan)
	}

	// Approved, a plain reconcile waits until it is applied.
	if r := run(t, "", "approve", "-n", ns, "database", "--plan", res.Plan.ID); r.err != nil {
		t.Fatal(r.transcript())
	}
	r = run(t, "", "reconcile", "-n", ns, "database", "--timeout=2m")
	if r.err != nil {
		t.Fatalf("reconcile after approving: %v\n%s", r.err, r.transcript())
	}
	// The request reached the controller before or during the apply: it
	// is answered by a plan made after it, the approved one applied, or
	// a plan of no changes after its apply.
	st := statusJSON(t, ns, "database")
	if st.Plan == nil || (st.Plan.State != "applied" && st.Plan.State != "no-changes") || st.Revisions.AppliedPlan != res.Plan.ID ||
		st.Ready == nil || st.Ready.Status != metav1.ConditionTrue {
		t.Fatalf("after reconcile: plan %+v, applied plan %q, ready %+v; want %s applied and Ready", st.Plan, st.Revisions.AppliedPlan, st.Ready, res.Plan.ID)
	}

	// Nothing changed since: planned with no changes is 0.
	if r := run(t, "", "reconcile", "-n", ns, "database", "--until=planned", "--timeout=2m"); r.err != nil {
		t.Fatalf("reconcile --until=planned without changes: %v\n%s", r.err, r.transcript())
	}

	// A change planned while suspended waits for resume, which waits for
	// the new plan's approval until its timeout (exit 3), then exits 2
	// with --until=planned.
	if r := run(t, "", "suspend", "-n", ns, "database"); r.err != nil {
		t.Fatal(r.transcript())
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	obj.Spec.Vars[0].Value = testenv.JSONValue(20)
	if err := env.Client.Update(ctx, obj); err != nil {
		t.Fatal(err)
	}
	r = run(t, "", "resume", "-n", ns, "database", "--timeout=5s")
	if code := ExitCode(r.err); code != ExitTimeout {
		t.Fatalf("resume with a plan waiting for approval: exit %d, want %d\n%s", code, ExitTimeout, r.transcript())
	}
	r = run(t, "", "reconcile", "-n", ns, "database", "--until=planned", "--timeout=2m")
	var exit *exitError
	if !errors.As(r.err, &exit) || exit.code != ExitPending {
		t.Fatalf("reconcile --until=planned with a change: %v\n%s", r.err, r.transcript())
	}
}

// statusJSON is `status -o json` of ns/name.
func statusJSON(t *testing.T, ns, name string) statusReport {
	t.Helper()
	r := run(t, "", "status", "-n", ns, name, "-o", "json")
	if r.err != nil {
		t.Fatal(r.transcript())
	}
	var st statusReport
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	return st
}
