package ui

import (
	"bytes"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/runlog"
)

// objectStream follows one object and its run logs (two watches): each
// change sends the page's live part and logs again, rendered as the page
// renders them. The plan shown is not replaced: a newer pending plan is
// announced instead, so that Approve always means the plan on screen.
func (s *Server) objectStream(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ns, name := r.PathValue("ns"), r.PathValue("name")
	shown := r.URL.Query().Get("plan")
	objects, err := s.c.Watch(ctx, &v1alpha1.TerraformList{}, client.InNamespace(ns), client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)})
	if err != nil {
		http.Error(w, refusal(err, "watch Terraform "+ns+"/"+name), statusCode(err))
		return
	}
	defer objects.Stop()
	// The logs are optional: a user who may not read Secrets sees the
	// object change without them.
	logs, err := s.c.Watch(ctx, &corev1.SecretList{}, client.InNamespace(ns), client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", runlog.SecretName(name))})
	if err != nil {
		logs = watch.NewEmptyWatch()
	}
	defer logs.Stop()
	ev, ok := startEvents(w)
	if !ok {
		return
	}
	merged := make(chan watch.Event)
	done := make(chan struct{})
	defer close(done)
	for _, wt := range []watch.Interface{objects, logs} {
		go func() {
			for e := range wt.ResultChan() {
				select {
				case merged <- e:
				case <-done:
					return
				}
			}
		}()
	}
	s.forward(ctx, ev, watch.NewProxyWatcher(merged), func(e watch.Event) bool {
		switch o := e.Object.(type) {
		case *v1alpha1.Terraform:
			if e.Type == watch.Deleted {
				return ev.sendJSON("live", map[string]string{"html": s.fragment("gone", nil)})
			}
			f := factsOf(o, s.now())
			return ev.sendJSON("live", map[string]string{"html": s.fragment("live", liveOf(o, f, shown))})
		case *corev1.Secret:
			// The watched Secret is the logs: no read of it again.
			logs := runlog.Parse(o)
			if e.Type == watch.Deleted {
				logs = nil
			}
			return ev.sendJSON("logs", map[string]string{"html": s.fragment("logs", logsFrom(logs))})
		}
		return e.Type != watch.Error
	})
}

// fragment renders one named template; "" when it fails.
func (s *Server) fragment(name string, data any) string {
	var b bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		return ""
	}
	return b.String()
}

// lastLines is the last n lines of text.
func lastLines(text string, n int) string {
	lines := strings.SplitAfter(text, "\n")
	if len(lines) <= n {
		return text
	}
	return strings.Join(lines[len(lines)-n:], "")
}
