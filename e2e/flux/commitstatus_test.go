package flux

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// Since notification-controller 1.8, a commit-status provider drops every
// event that is neither a commit-status update nor an error. Through the
// real notification-controller to a stand-in forge (Gitea's API on
// loopback), a commit shows what Landform did with it: pending while its
// plan waits for approval, success once applied, failure when a plan
// fails, on the commit that was planned, each result once.
func TestCommitStatusReachesAForge(t *testing.T) {
	s := newScenario(t, "forge")
	g := NewWithT(t)
	forge := newForge(t)
	s.forgeProvider("forge", "gitea", forge.url, nil)

	tf := fileModule(s.ns, "forge", filepath.Join(t.TempDir(), "forge.txt"), "one")
	tf.Spec.ApprovePlan = ""
	g.Expect(s.c.Create(s.ctx, tf)).To(Succeed())
	var obj *infrav1.Terraform
	s.eventually("a plan waits for approval", func(g Gomega) {
		obj = s.terraform(g, tf.Name)
		g.Expect(obj.PendingPlan()).NotTo(BeEmpty())
	})
	rev := obj.Status.Plan.Revision
	sha := rev[strings.LastIndex(rev, ":")+1:]
	forge.expect(t, sha, "pending")

	s.approve(tf.Name, obj.PendingPlan())
	forge.expect(t, sha, "pending", "success")

	// The failed run's own error event passes too (notification-controller
	// 1.9 lets errors through): a failure may be posted twice, under the
	// same context.
	s.setContent(tf.Name, map[string]any{"not": "a string"})
	NewWithT(t).Eventually(func(g Gomega) {
		got := forge.statuses(sha)
		g.Expect(len(got)).To(BeNumerically(">=", 3))
		for _, st := range got[2:] {
			g.Expect(st.State).To(Equal("failure"))
			// The provider describes a status by the event's reason.
			g.Expect(st.Description).To(Equal("invalid configuration"))
		}
	}).WithTimeout(waitTimeout).WithPolling(time.Second).Should(Succeed())
	got := forge.statuses(sha)
	g.Expect(got[0].Context).NotTo(BeEmpty())
	for _, st := range got {
		g.Expect(st.Context).To(Equal(got[0].Context), "one status per object, updated")
	}

	// Fixed, so that the scenario's clean-up can destroy it.
	s.setContent(tf.Name, "two")
	s.eventually("Ready again", func(g Gomega) { expectTerraformReady(g, s.terraform(g, tf.Name)) })
}

// forgeProvider creates a Provider name of type typ for the stand-in forge
// at url (with its token, made once), with extra spec fields, and an Alert
// of the same name sending it every Terraform object's events.
func (s *scenario) forgeProvider(name, typ, url string, extra map[string]any) {
	s.t.Helper()
	g := NewWithT(s.t)
	err := s.c.Create(s.ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "forge-token"},
		StringData: map[string]string{"token": "forge-token-value"},
	})
	g.Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
	spec := map[string]any{"type": typ, "address": url + "/team/infra", "secretRef": map[string]any{"name": "forge-token"}}
	maps.Copy(spec, extra)
	for _, o := range []*unstructured.Unstructured{
		{Object: map[string]any{
			"apiVersion": "notification.toolkit.fluxcd.io/v1beta3", "kind": "Provider",
			"metadata": map[string]any{"namespace": s.ns, "name": name}, "spec": spec,
		}},
		{Object: map[string]any{
			"apiVersion": "notification.toolkit.fluxcd.io/v1beta3", "kind": "Alert",
			"metadata": map[string]any{"namespace": s.ns, "name": name},
			"spec": map[string]any{
				"providerRef":   map[string]any{"name": name},
				"eventSeverity": "info",
				"eventSources":  []any{map[string]any{"kind": infrav1.TerraformKind, "name": "*"}},
			},
		}},
	} {
		g.Expect(s.c.Create(s.ctx, o)).To(Succeed())
	}
}

// forge stands in for Gitea's API: the version the SDK asks for, the
// token's user, a repository's commit statuses and its pull requests'
// comments, which it records.
type forge struct {
	url string
	mu  sync.Mutex
	// posted are the statuses created, by commit.
	posted map[string][]forgeStatus
	// comments are the pull requests' comments, by number; calls counts
	// the comment calls by method.
	comments map[string][]*forgeComment
	calls    map[string]int
}

// forgeComment is a comment as Gitea returns it.
type forgeComment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
	User struct {
		Login string `json:"login"`
	} `json:"user"`
}

type forgeStatus struct {
	State       string `json:"state"`
	Description string `json:"description"`
	Context     string `json:"context"`
}

func newForge(t *testing.T) *forge {
	f := &forge{posted: map[string][]forgeStatus{}, comments: map[string][]*forgeComment{}, calls: map[string]int{}}
	mux := http.NewServeMux()
	f.handleComments(mux)
	mux.HandleFunc("GET /api/v1/version", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"version": "1.22.0"})
	})
	mux.HandleFunc("GET /api/v1/repos/team/infra/commits/{sha}/statuses", func(w http.ResponseWriter, r *http.Request) {
		// Newest first, as Gitea lists them.
		all := f.statuses(r.PathValue("sha"))
		out := make([]forgeStatus, 0, len(all))
		for i := len(all) - 1; i >= 0; i-- {
			out = append(out, all[i])
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("POST /api/v1/repos/team/infra/statuses/{sha}", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "token forge-token-value" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		var st forgeStatus
		if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.posted[r.PathValue("sha")] = append(f.posted[r.PathValue("sha")], st)
		f.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(st)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// handleComments serves what Gitea's pull request comment provider
// calls: the token's user, and a pull request's comments listed, created
// and edited.
func (f *forge) handleComments(mux *http.ServeMux) {
	authorized := func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("Authorization") != "token forge-token-value" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return false
		}
		return true
	}
	mux.HandleFunc("GET /api/v1/user", func(w http.ResponseWriter, r *http.Request) {
		if authorized(w, r) {
			_ = json.NewEncoder(w).Encode(map[string]any{"id": 7, "login": "landform-bot"})
		}
	})
	mux.HandleFunc("GET /api/v1/repos/team/infra/issues/{n}/comments", func(w http.ResponseWriter, r *http.Request) {
		if !authorized(w, r) {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.calls["GET"]++
		_ = json.NewEncoder(w).Encode(append([]*forgeComment{}, f.comments[r.PathValue("n")]...))
	})
	mux.HandleFunc("POST /api/v1/repos/team/infra/issues/{n}/comments", func(w http.ResponseWriter, r *http.Request) {
		c := &forgeComment{}
		if !authorized(w, r) || json.NewDecoder(r.Body).Decode(c) != nil {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.calls["POST"]++
		c.ID = int64(100 + f.calls["POST"])
		c.User.Login = "landform-bot"
		f.comments[r.PathValue("n")] = append(f.comments[r.PathValue("n")], c)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(c)
	})
	mux.HandleFunc("PATCH /api/v1/repos/team/infra/issues/comments/{id}", func(w http.ResponseWriter, r *http.Request) {
		var edit forgeComment
		if !authorized(w, r) || json.NewDecoder(r.Body).Decode(&edit) != nil {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.calls["PATCH"]++
		for _, cs := range f.comments {
			for _, c := range cs {
				if strconv.FormatInt(c.ID, 10) == r.PathValue("id") {
					c.Body = edit.Body
					_ = json.NewEncoder(w).Encode(c)
					return
				}
			}
		}
		http.NotFound(w, r)
	})
}

// pullComments are the comments of pull request n, and how many times a
// comment was created and edited.
func (f *forge) pullComments(n string) (comments []forgeComment, created, edited int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.comments[n] {
		comments = append(comments, *c)
	}
	return comments, f.calls["POST"], f.calls["PATCH"]
}

func (f *forge) statuses(sha string) []forgeStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]forgeStatus(nil), f.posted[sha]...)
}

// expect waits until commit sha has exactly the statuses states, in order.
func (f *forge) expect(t *testing.T, sha string, states ...string) {
	t.Helper()
	NewWithT(t).Eventually(func() []string {
		var got []string
		for _, st := range f.statuses(sha) {
			got = append(got, st.State)
		}
		return got
	}).WithTimeout(waitTimeout).WithPolling(time.Second).Should(Equal(states), "the commit statuses of %s", sha)
}
