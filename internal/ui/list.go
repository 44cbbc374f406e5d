package ui

import (
	"cmp"
	"context"
	"net/http"
	"net/url"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// filter is the list's query: ?ns=&state=&q=.
type filter struct {
	Namespace, State, Query string
}

func filterOf(q url.Values) filter {
	return filter{Namespace: q.Get("ns"), State: q.Get("state"), Query: q.Get("q")}
}

func (f filter) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"ns": f.Namespace, "state": f.State, "q": f.Query} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// listView is the list page's data.
type listView struct {
	page
	Rows   []facts
	Filter filter
	States []string
	// Counts counts every listed object by state, filters aside.
	Counts map[string]int
	Total  int
	// Stream is the URL of the live updates, from the list's
	// resourceVersion on.
	Stream string
	// Scope says which namespaces are listed, and why when not all.
	Scope string
}

// list lists the Terraform objects the user may list (inScope).
func (s *Server) list(ctx context.Context, f filter) (*v1alpha1.TerraformList, string, error) {
	var l v1alpha1.TerraformList
	scope, err := s.inScope(f.Namespace, func(ns string) error { return s.c.List(ctx, &l, client.InNamespace(ns)) })
	return &l, scope, err
}

// inScope calls read on namespace ns ("": every namespace) or, when the
// API server refuses every namespace, on the fallback namespace; scope
// says which, and why when not all.
func (s *Server) inScope(ns string, read func(ns string) error) (scope string, err error) {
	err = read(ns)
	if ns == "" && apierrors.IsForbidden(err) && s.ns != "" {
		return "namespace " + s.ns + " only: you may not list Terraform objects across namespaces", read(s.ns)
	}
	return cmp.Or(ns, "all namespaces"), err
}

func (s *Server) listPage(w http.ResponseWriter, r *http.Request) {
	f := filterOf(r.URL.Query())
	l, scope, err := s.list(r.Context(), f)
	if err != nil {
		s.fail(w, r, "listing Terraform objects", err)
		return
	}
	v := listView{page: s.page("Terraform objects"), Filter: f, Scope: scope, Counts: map[string]int{},
		States: []string{stateReady, statePending, stateDrifted, stateSuspended, stateFailing}}
	now := s.now()
	for i := range l.Items {
		fa := factsOf(&l.Items[i], now)
		v.Total++
		for _, st := range v.States {
			if fa.is(st) {
				v.Counts[st]++
			}
		}
		if fa.matches(f) {
			v.Rows = append(v.Rows, fa)
		}
	}
	slices.SortFunc(v.Rows, func(a, b facts) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	q := f.values()
	q.Set("rv", l.ResourceVersion)
	v.Stream = "/stream/list?" + q.Encode()
	s.render(w, http.StatusOK, "list.html", v)
}

// listStream sends the list's changes from the page's resourceVersion on,
// each row rendered as the page renders it: a watch, not polling.
func (s *Server) listStream(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := filterOf(q)
	// A browser that reconnects says where it was (the id of each event is
	// its resourceVersion).
	rv := cmp.Or(r.Header.Get("Last-Event-ID"), q.Get("rv"))
	ev, ok := startEvents(w)
	if !ok {
		return
	}
	var watcher watch.Interface
	_, err := s.inScope(f.Namespace, func(ns string) (err error) {
		watcher, err = s.c.Watch(r.Context(), &v1alpha1.TerraformList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
		return err
	})
	if err != nil {
		ev.send("reload", "")
		return
	}
	defer watcher.Stop()
	s.forward(r.Context(), ev, watcher, func(e watch.Event) bool {
		obj, ok := e.Object.(*v1alpha1.Terraform)
		if !ok {
			// An expired resourceVersion: the page lists again.
			ev.id = ""
			ev.send("reload", "")
			return false
		}
		ev.id = obj.ResourceVersion
		if e.Type == watch.Bookmark {
			return true
		}
		key := obj.Namespace + "/" + obj.Name
		fa := factsOf(obj, s.now())
		if e.Type == watch.Deleted || !fa.matches(f) {
			return ev.send("gone", key)
		}
		html := s.fragment("row", fa)
		if html == "" {
			return false
		}
		return ev.sendJSON("row", map[string]string{"key": key, "html": html})
	})
}
