package flux

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/gitops"
)

// A pull request's plan, the way docs/previews.md sets it up, through the
// real source-controller and notification-controller to a stand-in forge
// (Gitea's API on loopback): a preview of the change posts one comment
// naming the addresses, edits that same comment on a new commit, marks
// each planned commit, tells a failure without the engine's text, and
// neither touches the target's state nor applies, nor destroys when the
// pull request goes.
func TestPreviewOnAPullRequest(t *testing.T) {
	s := newScenario(t, "preview")
	g := NewWithT(t)
	forge := newForge(t)
	s.forgeProviders(forge.url)

	path := filepath.Join(t.TempDir(), "app.txt")
	target := fileModule(s.ns, "app", path, "one")
	g.Expect(s.c.Create(s.ctx, target)).To(Succeed())
	s.eventually("the target applied", func(g Gomega) { expectTerraformReady(g, s.terraform(g, "app")) })
	state := s.secret(NewWithT(t), "tfstate-default-app")
	stateRV, stateBytes := state.ResourceVersion, state.Data["tfstate"]

	// Pull request 7's head. A forge serves it as refs/pull/7/head, which
	// source-controller does not fetch from this git server (go-git
	// finds no object for it): a branch stands in for it here.
	head := s.pushPR(7, "add a resource", map[string]string{"modules/file/pr.tf": `resource "terraform_data" "pr" { input = "seven" }` + "\n"})
	g.Expect(s.c.Create(s.ctx, &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "app-pr-7"},
		Spec: sourcev1.GitRepositorySpec{URL: env.GitBaseURL + "/" + s.ns + ".git", Interval: metav1.Duration{Duration: 30 * time.Second},
			Reference: &sourcev1.GitRepositoryRef{Branch: "pr-7"}},
	})).To(Succeed())
	preview := terraform(s.ns, "app-pr-7", "./modules/file", variable("path", path), variable("content", "one"))
	preview.Spec.SourceRef.Name = "app-pr-7"
	preview.Spec.ApprovePlan = ""
	preview.Annotations = map[string]string{"event.toolkit.fluxcd.io/change_request": "7"}
	preview.Spec.Preview = &infrav1.PreviewSpec{StateFrom: &infrav1.PreviewTarget{Name: "app"}}
	g.Expect(s.c.Create(s.ctx, preview)).To(Succeed())

	var plan string
	s.eventually("one comment naming the new resource", func(g Gomega) {
		obj := s.terraform(g, "app-pr-7")
		g.Expect(obj.Status.Plan).NotTo(BeNil())
		plan = obj.Status.Plan.ID
		comments, created, _ := forge.pullComments("7")
		g.Expect(comments).To(HaveLen(1))
		g.Expect(created).To(Equal(1))
		body := comments[0].Body
		g.Expect(body).To(ContainSubstring("flux-pr-comment-key:"))
		g.Expect(body).To(ContainSubstring("**Plan `" + plan + "`**"))
		g.Expect(body).To(ContainSubstring("| + | `terraform_data.pr` |"))
		g.Expect(body).To(ContainSubstring("against `" + s.ns + "/app` (state serial"))
		g.Expect(body).NotTo(ContainSubstring("seven"), "addresses only, never a value")
	})
	forge.expectStatus(t, head, forgeStatus{State: "success", Description: "changes planned", Context: "landform/app"})

	// A new commit on the pull request: the same comment, edited.
	head2 := s.pushPR(7, "and another", map[string]string{"modules/file/pr2.tf": `resource "terraform_data" "second" { input = "eight" }` + "\n"})
	s.eventually("the same comment names both", func(g Gomega) {
		comments, created, edited := forge.pullComments("7")
		g.Expect(comments).To(HaveLen(1))
		g.Expect(created).To(Equal(1), "never a second comment")
		g.Expect(edited).To(BeNumerically(">=", 1))
		g.Expect(comments[0].Body).To(ContainSubstring("`terraform_data.second`"))
		g.Expect(comments[0].Body).To(ContainSubstring(head2[:10]))
	})
	forge.expectStatus(t, head2, forgeStatus{State: "success", Description: "changes planned", Context: "landform/app"})

	// A broken commit: the comment says the plan failed, not the engine's
	// text (which quotes the module's own words).
	head3 := s.pushPR(7, "broken", map[string]string{"modules/file/pr3.tf": `resource "terraform_data" "broken" { input = var.leaked_word }` + "\n"})
	s.eventually("the comment says the plan failed, redacted", func(g Gomega) {
		comments, created, _ := forge.pullComments("7")
		g.Expect(created).To(Equal(1))
		g.Expect(comments[0].Body).To(ContainSubstring("the error text is kept out of preview events"))
		g.Expect(comments[0].Body).To(ContainSubstring("landform logs app-pr-7 -n " + s.ns))
		g.Expect(comments[0].Body).NotTo(ContainSubstring("leaked_word"))
	})
	s.eventually("the broken commit is marked failed", func(g Gomega) {
		got := forge.statuses(head3)
		g.Expect(got).NotTo(BeEmpty())
		g.Expect(got[len(got)-1].State).To(Equal("failure"))
		g.Expect(got[len(got)-1].Context).To(Equal("landform/app"))
	})
	g.Expect(conditions.GetMessage(s.terraform(g, "app-pr-7"), meta.ReadyCondition)).To(ContainSubstring("leaked_word"), "status keeps the whole error for whoever may read it")

	// Nothing applied, the target's state never written.
	b, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal("one"))
	g.Expect(s.secret(g, "tfstate-default-app").ResourceVersion).To(Equal(stateRV))

	// The pull request closes: its objects go, nothing is destroyed.
	g.Expect(s.c.Delete(s.ctx, preview)).To(Succeed())
	g.Expect(s.c.Delete(s.ctx, &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "app-pr-7"}})).To(Succeed())
	s.eventually("the preview is gone", func(g Gomega) { g.Expect(s.gone(g, preview)).To(BeTrue()) })
	b, err = os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal("one"), "nothing destroyed")
	g.Expect(s.secret(g, "tfstate-default-app").Data["tfstate"]).To(Equal(stateBytes), "the target's state, byte for byte")
	g.Expect(s.c.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: "tfstate-default-app-pr-7"}, &corev1.Secret{})).NotTo(Succeed(), "the snapshot went with it")
	g.Expect(s.secret(g, "tfstate-default-app").ResourceVersion).To(Equal(stateRV))
}

// pushPR pushes a commit to pull request n's branch (pr-<n>) and asks
// its GitRepository (if it exists yet) to fetch it.
func (s *scenario) pushPR(n int, message string, files map[string]string) string {
	s.t.Helper()
	ref := "refs/heads/pr-" + strconv.Itoa(n)
	commit, err := s.repo.CommitAndPushTo(ref, message, files)
	if err != nil {
		s.t.Fatal(err)
	}
	gr := &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "app-pr-" + strconv.Itoa(n)}}
	if err := s.c.Get(s.ctx, client.ObjectKeyFromObject(gr), gr); err == nil {
		if err := gitops.RequestReconcile(s.ctx, s.c, gr); err != nil {
			s.t.Fatal(err)
		}
	}
	return commit
}

// forgeProviders are the recipe's two Providers and Alerts: a pull
// request comment and a commit status with a fixed check name.
func (s *scenario) forgeProviders(url string) {
	s.t.Helper()
	s.forgeProvider("pr-comment", "giteapullrequestcomment", url, nil)
	s.forgeProvider("pr-status", "gitea", url, map[string]any{
		"commitStatusExpr": "'landform/' + (has(event.metadata.preview) ? event.metadata.preview : event.involvedObject.name)",
	})
}

// expectStatus waits until commit sha has a status equal to want.
func (f *forge) expectStatus(t *testing.T, sha string, want forgeStatus) {
	t.Helper()
	NewWithT(t).Eventually(func() []forgeStatus { return f.statuses(sha) }).
		WithTimeout(waitTimeout).WithPolling(time.Second).Should(ContainElement(want), "the commit statuses of %s", sha)
}
