package ui

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// TestGuard: only the browser given the URL gets in, only on the address
// the server listens on, and a post needs the page's CSRF token and no
// foreign Origin.
func TestGuard(t *testing.T) {
	ns := env.Namespace(t)
	pendingObject(t, ns, "guarded", "plan-0123456789-0000000001")
	s := serve(t, env.Config, Options{Namespace: ns})
	approve := s.base() + objectPath(ns, "guarded") + "/approve"
	form := url.Values{"csrf": {s.csrf}, "plan": {"plan-0123456789-0000000001"}}

	if got := status(t, http.DefaultClient, "GET", s.base()+"/", nil, nil); got != http.StatusUnauthorized {
		t.Errorf("without the token: %d; want 401", got)
	}
	if got := status(t, http.DefaultClient, "GET", s.base()+"/?token=wrong", nil, nil); got != http.StatusUnauthorized {
		t.Errorf("with a wrong token: %d; want 401", got)
	}
	c := httpClient(t, s)
	if got := status(t, c, "GET", s.base()+"/", nil, nil); got != http.StatusOK {
		t.Errorf("let in: %d; want 200", got)
	}
	// DNS rebinding: a page of evil.example resolving to 127.0.0.1.
	if got := status(t, c, "GET", s.base()+"/", nil, map[string]string{"Host": "evil.example:80"}); got != http.StatusMisdirectedRequest {
		t.Errorf("another Host: %d; want 421", got)
	}
	noCSRF := url.Values{"plan": form["plan"]}
	if got := status(t, c, "POST", approve, noCSRF, nil); got != http.StatusForbidden {
		t.Errorf("a post without the CSRF token: %d; want 403", got)
	}
	if got := status(t, c, "POST", approve, form, map[string]string{"Origin": "http://evil.example"}); got != http.StatusForbidden {
		t.Errorf("a post from another Origin: %d; want 403", got)
	}
	if a := annotation(t, ns, "guarded"); a != "" {
		t.Fatalf("a refused post approved %q", a)
	}
	if got := status(t, c, "POST", approve, form, map[string]string{"Origin": s.base()}); got != http.StatusOK {
		t.Errorf("the page's own post: %d; want 200 after the redirect", got)
	}
	if a := annotation(t, ns, "guarded"); a != "plan-0123456789-0000000001" {
		t.Errorf("the page's own post approved %q", a)
	}

	if _, err := s.Listen("0.0.0.0:0"); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("listening on every interface: %v; want a refusal", err)
	}
}

func status(t *testing.T, c *http.Client, method, u string, form url.Values, headers map[string]string) int {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestActions: Suspend, Resume and Reconcile are the user's patches of
// the object, as `landform suspend`, `resume` and `reconcile` make them.
func TestActions(t *testing.T) {
	ns := env.Namespace(t)
	pendingObject(t, ns, "acted", "plan-0123456789-0000000002")
	s := serve(t, env.Config, Options{Namespace: ns})
	c := httpClient(t, s)
	post := func(action string) {
		t.Helper()
		if got := status(t, c, "POST", s.base()+objectPath(ns, "acted")+"/"+action, url.Values{"csrf": {s.csrf}}, map[string]string{"Origin": s.base()}); got != http.StatusOK {
			t.Fatalf("%s: %d; want 200 after the redirect", action, got)
		}
	}
	post("suspend")
	if obj := current(t, ns, "acted"); !obj.Spec.Suspend {
		t.Error("Suspend did not set spec.suspend")
	}
	post("resume")
	obj := current(t, ns, "acted")
	requested := obj.Annotations[meta.ReconcileRequestAnnotation]
	if obj.Spec.Suspend || requested == "" {
		t.Errorf("Resume left suspend %v, requested reconcile at %q", obj.Spec.Suspend, requested)
	}
	post("reconcile")
	if again := current(t, ns, "acted").Annotations[meta.ReconcileRequestAnnotation]; again == "" || again == requested {
		t.Errorf("Reconcile requested at %q (before: %q); want a new request", again, requested)
	}
	if got := status(t, c, "POST", s.base()+objectPath(ns, "acted")+"/delete", url.Values{"csrf": {s.csrf}}, nil); got != http.StatusNotFound {
		t.Errorf("an unknown action: %d; want 404", got)
	}
}

func current(t *testing.T, ns, name string) *v1alpha1.Terraform {
	t.Helper()
	var obj v1alpha1.Terraform
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &obj); err != nil {
		t.Fatal(err)
	}
	return &obj
}
