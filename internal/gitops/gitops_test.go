package gitops

import (
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/landform-dev/landform/internal/devenv/gitserver"
)

// A commit with written and removed files reaches the server's main branch.
func TestCommitAndPush(t *testing.T) {
	g := NewWithT(t)
	root, seed := t.TempDir(), t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(seed, "old.yaml"), []byte("old"), 0o644)).To(Succeed())
	g.Expect(gitserver.Seed(root, "repo", seed)).To(Succeed())
	h, err := gitserver.Handler(root, true)
	g.Expect(err).NotTo(HaveOccurred())
	srv := httptest.NewServer(h)
	defer srv.Close()

	w, err := Clone(srv.URL + "/repo.git")
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Remove()
	commit, err := w.CommitAndPush("change", map[string]string{"dir/new.yaml": "new"}, "old.yaml")
	g.Expect(err).NotTo(HaveOccurred())

	out, err := exec.Command("git", "--git-dir", filepath.Join(root, "repo.git"), "ls-tree", "-r", "--name-only", "main").Output()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Fields(string(out))).To(Equal([]string{"dir/new.yaml"}))
	out, err = exec.Command("git", "--git-dir", filepath.Join(root, "repo.git"), "rev-parse", "main").Output()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.TrimSpace(string(out))).To(Equal(commit))
}

func TestCondition(t *testing.T) {
	g := NewWithT(t)
	u := NewKustomization("ns", "app", map[string]any{"path": "./app"})
	g.Expect(u.GetAPIVersion()).To(Equal("kustomize.toolkit.fluxcd.io/v1"))
	g.Expect(Condition(u, "Ready")).To(BeNil())
	g.Expect(ReadyMessage(u)).To(Equal("not reconciled yet"))
	g.Expect(unstructured.SetNestedSlice(u.Object, []any{
		map[string]any{"type": "Reconciling", "status": "True", "reason": "Progressing", "message": "working", "lastTransitionTime": "2026-01-01T00:00:00Z"},
		map[string]any{"type": "Ready", "status": "False", "reason": "DependencyNotReady", "message": "dependency 'ns/infra' is not ready", "lastTransitionTime": "2026-01-01T00:00:00Z"},
	}, "status", "conditions")).To(Succeed())
	c := Condition(u, "Ready")
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Reason).To(Equal("DependencyNotReady"))
	g.Expect(ReadyMessage(u)).To(Equal("dependency 'ns/infra' is not ready"))
}
