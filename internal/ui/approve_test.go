package ui

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/testenv"
)

// realLabel marks the objects the real controller of this package
// reconciles (--watch-label-selector); the other tests write statuses
// themselves.
const realLabel = "ui-test.landform.dev/controller"

// password is the sensitive value the module reads from a Secret: it must
// never reach a page.
const password = "hunter2-do-not-show-7Qx"

// TestApproveInTheBrowser drives the UI in Chromium against the real
// controller, local runners and OpenTofu: the pending plan is shown
// resource by resource, a plan that changed after the page loaded is not
// approved, Approve applies exactly the plan shown (the create ran once)
// and the page follows the object to Ready; no sensitive value appears in
// any page.
func TestApproveInTheBrowser(t *testing.T) {
	var p testenv.Programs
	testenv.SkipOrFail(t, p.Find())
	ctx := browser(t)
	artifacts, err := testenv.StartArtifacts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(artifacts.Close)
	ns := env.Namespace(t)
	bg := context.Background()
	module := map[string]string{"main.tf": `
variable "size" { type = number }
variable "password" {
  type      = string
  sensitive = true
}
variable "creates" { type = string }
resource "terraform_data" "database" {
  input = { size = var.size, password = var.password, tags = { team = "data" } }
  provisioner "local-exec" { command = "echo created >> ${var.creates}" }
}
output "size" { value = var.size }
output "password" {
  value     = var.password
  sensitive = true
}
`}
	if _, err := artifacts.Publish(bg, env.Client, ns, module); err != nil {
		t.Fatal(err)
	}
	creates := filepath.Join(t.TempDir(), "creates")
	if err := env.Client.Create(bg, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-password"}, StringData: map[string]string{"password": password}}); err != nil {
		t.Fatal(err)
	}
	testenv.StartController(t, testenv.ControllerOptions{
		Binary: p.Controller, Kubeconfig: env.Kubeconfig(t), Runner: "local", RunnerBinary: p.Runner, Engine: p.Tofu,
		WorkDir: t.TempDir(), Args: []string{"--watch-label-selector=" + realLabel},
	})
	obj := &v1alpha1.Terraform{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "database", Labels: map[string]string{realLabel: "true"}},
		Spec: v1alpha1.TerraformSpec{
			SourceRef:            v1alpha1.SourceReference{Kind: sourcev1.GitRepositoryKind, Name: "repo"},
			Path:                 "./",
			Interval:             metav1.Duration{Duration: time.Hour},
			RetryInterval:        &metav1.Duration{Duration: 2 * time.Second},
			Vars:                 []v1alpha1.Variable{{Name: "size", Value: testenv.JSONValue(10)}, {Name: "creates", Value: testenv.JSONValue(creates)}},
			VarsFrom:             []v1alpha1.VarsReference{{Kind: "Secret", Name: "db-password"}},
			WriteOutputsToSecret: &v1alpha1.WriteOutputsToSecretSpec{Name: "database-outputs"},
		},
	}
	if err := env.Client.Create(bg, obj); err != nil {
		t.Fatal(err)
	}
	first := pendingPlan(t, obj, "")

	s := serve(t, env.Config, Options{Namespace: ns})
	must(t, ctx, chromedp.Navigate(s.URL()), chromedp.WaitVisible(chromedp.CSS(`tr[data-key="`+ns+`/database"]`)))
	if row := textOf(t, ctx, `tr[data-key="`+ns+`/database"]`); !strings.Contains(row, first) || !strings.Contains(row, "pending") {
		t.Errorf("the list's row shows %q; want the pending plan %s", row, first)
	}
	screenshot(t, ctx, "list")
	noSecret(t, ctx, "the list")

	must(t, ctx, chromedp.Navigate(s.base()+objectPath(ns, "database")), chromedp.WaitVisible(chromedp.CSS("#approve")))
	plan := textOf(t, ctx, "#plan")
	for _, want := range []string{"terraform_data.database", "input.size", "10", `"data"`, "(sensitive value)", "Approve plan " + first} {
		if !strings.Contains(plan, want) {
			t.Errorf("the plan section lacks %q:\n%s", want, plan)
		}
	}
	screenshot(t, ctx, "plan")
	noSecret(t, ctx, "the object page")

	// The plan changes while the page shows the first one: the page says
	// so, and its Approve approves nothing.
	patchVars(t, obj, 20, creates)
	second := pendingPlan(t, obj, first)
	waitText(t, ctx, "#newer", second)
	must(t, ctx, chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS("#problem")))
	if got := textOf(t, ctx, "#problem"); !strings.Contains(got, first+", which you reviewed, is no longer the pending plan; "+second+" is") {
		t.Errorf("approving a replaced plan says %q", got)
	}
	var cur v1alpha1.Terraform
	if err := env.Client.Get(bg, client.ObjectKeyFromObject(obj), &cur); err != nil {
		t.Fatal(err)
	}
	if a := cur.Annotations[v1alpha1.ApproveAnnotation]; a != "" {
		t.Fatalf("a replaced plan's Approve wrote approval %q", a)
	}
	screenshot(t, ctx, "plan-changed")

	// Reviewed again, approved: exactly that plan is applied, and the page
	// follows the object to Ready without a reload.
	must(t, ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#approve")))
	if got := textOf(t, ctx, "#approve"); !strings.Contains(got, second) {
		t.Fatalf("after a reload the button says %q; want plan %s", got, second)
	}
	must(t, ctx, chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS(".notice")))
	waitText(t, ctx, "#live .status", "Ready")
	waitText(t, ctx, "#live", second)
	if err := env.Client.Get(bg, client.ObjectKeyFromObject(obj), &cur); err != nil {
		t.Fatal(err)
	}
	if cur.Status.LastAppliedPlan != second {
		t.Errorf("last applied plan %q; want %s, the one approved", cur.Status.LastAppliedPlan, second)
	}
	if data, err := os.ReadFile(creates); err != nil || strings.Count(string(data), "created") != 1 {
		t.Errorf("the create ran %d times (%v); want once", strings.Count(string(data), "created"), err)
	}
	must(t, ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#outputs table")))
	out := textOf(t, ctx, "#outputs")
	if !strings.Contains(out, "20") || !strings.Contains(out, "(sensitive value)") {
		t.Errorf("the outputs section shows %q; want size 20 and the password masked", out)
	}
	waitText(t, ctx, "#runs", "apply")
	screenshot(t, ctx, "applied")
	noSecret(t, ctx, "the applied object's page")
}

func must(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.location.href + "\n" + document.body.innerText`))
		screenshot(t, ctx, "failure")
		t.Fatalf("%v; the browser shows:\n%s", err, body)
	}
}

// noSecret fails when the password is anywhere in the page's source.
func noSecret(t *testing.T, ctx context.Context, where string) {
	t.Helper()
	if strings.Contains(pageSource(t, ctx), password) {
		t.Errorf("%s shows the sensitive value", where)
	}
}

// pendingPlan waits for a pending plan other than not.
func pendingPlan(t *testing.T, obj *v1alpha1.Terraform, not string) string {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var cur v1alpha1.Terraform
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), &cur); err != nil {
			t.Fatal(err)
		}
		if p := cur.PendingPlan(); p != "" && p != not {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new pending plan; conditions %+v", cur.Status.Conditions)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func patchVars(t *testing.T, obj *v1alpha1.Terraform, size int, creates string) {
	t.Helper()
	var cur v1alpha1.Terraform
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), &cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Vars = []v1alpha1.Variable{{Name: "size", Value: testenv.JSONValue(size)}, {Name: "creates", Value: testenv.JSONValue(creates)}}
	if err := env.Client.Patch(context.Background(), &cur, patch); err != nil {
		t.Fatal(err)
	}
}
