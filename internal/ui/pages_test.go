package ui

import (
	"context"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/fluxcd/pkg/apis/meta"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/planstore"
)

// TestPlanPagesAndDrift: a large plan is paged, replaces and destroys
// first, and the drift the plan's refresh found is listed with its
// attributes, sensitive ones masked.
func TestPlanPagesAndDrift(t *testing.T) {
	ns := env.Namespace(t)
	obj := pendingObject(t, ns, "fleet", "plan-0123456789-drift00001")
	data, err := os.ReadFile("../planview/testdata/drift.json")
	if err != nil {
		t.Fatal(err)
	}
	p := &planstore.Plan{ID: obj.Status.Plan.ID, Revision: "main@sha1:0123456789", JSONPlan: data}
	ctx := context.Background()
	if err := (planstore.Store{Client: env.Client}).Save(ctx, obj, p); err != nil {
		t.Fatal(err)
	}
	obj.Status.Plan.Digest = p.Digest
	apimeta.SetStatusCondition(&obj.Status.Conditions, metav1.Condition{Type: v1alpha1.DriftedCondition, Status: metav1.ConditionTrue, Reason: "DriftDetected", Message: "2 resources changed outside Landform"})
	if err := env.Client.Status().Update(ctx, obj); err != nil {
		t.Fatal(err)
	}
	s := serve(t, env.Config, Options{Namespace: ns, PageSize: 2})
	c := httpClient(t, s)

	first := get(t, c, s.base()+objectPath(ns, "fleet"))
	plan := sectionText(first, "plan")
	if want := []string{"terraform_data.database", "terraform_data.old"}; !inOrder(plan, want...) {
		t.Errorf("page 1 does not show %v first (replace, then destroy):\n%s", want, plan)
	}
	if !strings.Contains(plan, "page 1 of 4") || strings.Contains(plan, "terraform_data.cache") {
		t.Errorf("page 1 is not the first two of the plan's resources:\n%s", plan)
	}
	if !strings.Contains(plan, "forces replacement") {
		t.Errorf("page 1 does not mark the attribute that forces the replacement")
	}
	second := sectionText(get(t, c, s.base()+objectPath(ns, "fleet")+"?page=2"), "plan")
	if !strings.Contains(second, "page 2 of 4") || !strings.Contains(second, "terraform_data.cache") {
		t.Errorf("page 2 is not the next resources:\n%s", second)
	}
	drift := sectionText(first, "drift")
	for _, want := range []string{"2 resources changed outside Landform", "terraform_data.network", "terraform_data.old", "input.size", "(sensitive value)"} {
		if !strings.Contains(drift, want) {
			t.Errorf("the drift section lacks %q:\n%s", want, drift)
		}
	}
	for _, secret := range []string{"hunter2", "s3cr3t-new", "changed-outside"} {
		if strings.Contains(first, secret) || strings.Contains(second, secret) {
			t.Errorf("the page shows the sensitive value %q", secret)
		}
	}
}

// TestListFollowsTheCluster: the list changes as the cluster does,
// without a reload: a new object appears, a drifted one is marked, a
// deleted one goes.
func TestListFollowsTheCluster(t *testing.T) {
	ctx := browser(t)
	ns := env.Namespace(t)
	pendingObject(t, ns, "alpha", "plan-0123456789-list000001")
	s := serve(t, env.Config, Options{Namespace: ns})
	must(t, ctx, chromedp.Navigate(s.URL()+"&ns="+ns), chromedp.WaitVisible(chromedp.CSS(`tr[data-key="`+ns+`/alpha"]`)))
	// Mark the page: a reload would lose it.
	must(t, ctx, chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))

	beta := pendingObject(t, ns, "beta", "plan-0123456789-list000002")
	waitText(t, ctx, `tr[data-key="`+ns+`/beta"]`, "plan-0123456789-list000002")
	apimeta.SetStatusCondition(&beta.Status.Conditions, metav1.Condition{Type: v1alpha1.DriftedCondition, Status: metav1.ConditionTrue, Reason: "DriftDetected", Message: "drifted"})
	apimeta.SetStatusCondition(&beta.Status.Conditions, metav1.Condition{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: "ReconciliationSucceeded", Message: "applied"})
	beta.Status.Plan = nil
	if err := env.Client.Status().Update(context.Background(), beta); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, `tr[data-key="`+ns+`/beta"]`, "drifted")
	if got := textOf(t, ctx, `tr[data-key="`+ns+`/beta"]`); !strings.Contains(got, "Ready") || strings.Contains(got, "pending") {
		t.Errorf("the changed row shows %q; want Ready, drifted, no plan", got)
	}
	if err := env.Client.Delete(context.Background(), beta); err != nil {
		t.Fatal(err)
	}
	gone, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`new Promise(r => { const f = () => document.querySelector('tr[data-key="`+ns+`/beta"]') ? setTimeout(f, 100) : r(true); f(); })`, chromedp.EvalAwaitPromise))
	if err != nil || !gone {
		t.Errorf("the deleted object's row stayed (%v)", err)
	}
	if kept, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.notReloaded === true`)); err != nil || !kept {
		t.Errorf("the page was reloaded to show the changes (%v); want live updates", err)
	}
}

func get(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", u, resp.StatusCode, err, b)
	}
	return string(b)
}

// sectionText is the page's <section id="id">, tags stripped.
func sectionText(page, id string) string {
	i := strings.Index(page, `<section id="`+id+`">`)
	if i < 0 {
		return ""
	}
	rest := page[i:]
	if j := strings.Index(rest, "</section>"); j >= 0 {
		rest = rest[:j]
	}
	return regexp.MustCompile(`\s+`).ReplaceAllString(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(rest, " "), " ")
}

func inOrder(s string, subs ...string) bool {
	for _, sub := range subs {
		i := strings.Index(s, sub)
		if i < 0 {
			return false
		}
		s = s[i+len(sub):]
	}
	return true
}

// TestDependenciesAndConsumers: an object's page names what it depends on,
// with each dependency's Ready, and what consumes it: a Terraform object
// that depends on it and a Deployment that mounts its outputs Secret.
func TestDependenciesAndConsumers(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	pendingObject(t, ns, "network", "plan-0123456789-deps000001")
	db := pendingObject(t, ns, "database", "plan-0123456789-deps000002")
	db.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: "network"}}
	db.Spec.WriteOutputsToSecret = &v1alpha1.WriteOutputsToSecretSpec{Name: "database-outputs"}
	if err := env.Client.Update(ctx, db); err != nil {
		t.Fatal(err)
	}
	app := pendingObject(t, ns, "app", "plan-0123456789-deps000003")
	app.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: "database"}}
	if err := env.Client.Update(ctx, app); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "web", Image: "web", EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "database-outputs"}}}}}},
		}},
	}}
	if err := env.Client.Create(ctx, web); err != nil {
		t.Fatal(err)
	}
	s := serve(t, env.Config, Options{Namespace: ns})
	page := sectionText(get(t, httpClient(t, s), s.base()+objectPath(ns, "database")), "dependencies")
	for _, want := range []string{"Terraform " + ns + "/network Not ready", "Terraform " + ns + "/app dependsOn", "Deployment " + ns + "/web Secret database-outputs: envFrom of container web"} {
		if !strings.Contains(page, want) {
			t.Errorf("the dependencies section lacks %q:\n%s", want, page)
		}
	}
}
