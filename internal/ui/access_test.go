package ui

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxcd/pkg/apis/meta"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// pendingObject creates a Terraform object whose status says plan id
// waits for approval (written by the test: no controller runs it).
func pendingObject(t *testing.T, ns, name, id string) *v1alpha1.Terraform {
	t.Helper()
	ctx := context.Background()
	obj := &v1alpha1.Terraform{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.TerraformSpec{
			SourceRef: v1alpha1.SourceReference{Kind: sourcev1.GitRepositoryKind, Name: "repo"},
			Path:      "./", Interval: metav1.Duration{Duration: time.Hour},
		},
	}
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	obj.Status.Plan = &v1alpha1.PlanStatus{ID: id, Pending: id, Add: 1, Resources: []string{"terraform_data.database"}}
	obj.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionFalse, Reason: v1alpha1.PlanPendingReason,
		Message: "plan " + id + " waits for approval", LastTransitionTime: metav1.Now()}}
	obj.Status.ObservedGeneration = obj.Generation
	if err := env.Client.Status().Update(ctx, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// reader is a user bound to a Role that may read Terraform objects and
// events in ns, and change nothing.
func reader(t *testing.T, ns string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "terraform-reader"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"terraforms"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "terraform-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "reader"}}}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "reader"}
	return cfg
}

// TestReadOnlyUser: a user bound to a read-only Role sees the object and
// its plan but no button, and a post forged with the page's own CSRF
// token is refused by the API server, which the page says.
func TestReadOnlyUser(t *testing.T) {
	ctx := browser(t)
	ns := env.Namespace(t)
	obj := pendingObject(t, ns, "network", "plan-0123456789-abcdef0123")
	s := serve(t, reader(t, ns), Options{Namespace: ns})

	must(t, ctx, chromedp.Navigate(s.URL()), chromedp.WaitVisible(chromedp.CSS(`tr[data-key="`+ns+`/network"]`)))
	if got := textOf(t, ctx, "main"); !strings.Contains(got, "namespace "+ns+" only: you may not list Terraform objects across namespaces") {
		t.Errorf("the list does not say why it shows one namespace:\n%s", got)
	}
	must(t, ctx, chromedp.Navigate(s.base()+objectPath(ns, "network")), chromedp.WaitVisible(chromedp.CSS("#read-only")))
	buttons, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("form[method=post], #approve").length`))
	if err != nil || buttons != 0 {
		t.Errorf("a read-only user's page has %d forms or buttons (%v); want none", buttons, err)
	}
	screenshot(t, ctx, "read-only")

	// The forged post carries the page's own token: the UI lets it through
	// and the API server refuses it.
	must(t, ctx, chromedp.Evaluate[chromedp.Void](`(() => {
		const f = document.createElement("form");
		f.method = "post";
		f.action = location.pathname + "/approve";
		for (const [k, v] of [["csrf", document.querySelector("meta[name=csrf-token]").content], ["plan", `+strconv.Quote(obj.Status.Plan.Pending)+`]]) {
			const i = document.createElement("input");
			i.type = "hidden"; i.name = k; i.value = v;
			f.appendChild(i);
		}
		document.body.appendChild(f);
		f.submit();
	})()`), chromedp.WaitVisible(chromedp.CSS("#problem")))
	if got := textOf(t, ctx, "#problem"); !strings.Contains(got, "The API server refused") || !strings.Contains(got, `User "reader" cannot patch resource "terraforms"`) {
		t.Errorf("the forged approval says %q; want the API server's refusal", got)
	}
	if a := annotation(t, ns, obj.Name); a != "" {
		t.Errorf("a read-only user's forged post approved %q", a)
	}
}

func annotation(t *testing.T, ns, name string) string {
	t.Helper()
	return current(t, ns, name).Annotations[v1alpha1.ApproveAnnotation]
}
