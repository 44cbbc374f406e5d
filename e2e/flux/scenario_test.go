package flux

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/cloud"
	"github.com/landform-dev/landform/internal/devenv/gitserver"
	"github.com/landform-dev/landform/internal/gitops"
	"github.com/landform-dev/landform/internal/testenv"
)

const (
	// waitTimeout bounds each wait. The scenarios run in parallel, with
	// every terraform run and every Flux controller sharing the machine's
	// cores; a wait normally ends within seconds.
	waitTimeout = 4 * time.Minute
	// repoName is each scenario's GitRepository.
	repoName = "repo"
)

// scenario is one test's namespace, git repository and GitRepository.
type scenario struct {
	t    *testing.T
	ctx  context.Context
	c    client.Client
	ns   string
	repo *gitops.Workdir
}

// newScenario runs t in parallel with the other scenarios, in namespace
// e2e-<name>, with its own repository e2e-<name>.git on the dev git server
// (seeded with modules/ like Env.GitURL, so that pushes of one scenario never
// give another a new revision) and a GitRepository "repo" for it. When the
// test ends it prints diagnostics if it failed, then deletes the
// Kustomizations and Terraform objects and waits for them to be gone.
func newScenario(t *testing.T, name string) *scenario {
	t.Helper()
	testenv.SkipOrFail(t, unavailable)
	t.Parallel()
	s := &scenario{t: t, ctx: context.Background(), c: env.Client, ns: "e2e-" + name}
	if err := gitserver.Seed(filepath.Join(env.StateDir, "git"), s.ns, repoRoot, "modules"); err != nil {
		t.Fatal(err)
	}
	repo, err := gitops.Clone(env.GitBaseURL + "/" + s.ns + ".git")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(repo.Remove)
	s.repo = repo
	if err := s.c.Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}); err != nil {
		t.Fatal(err)
	}
	gr := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: repoName},
		Spec: sourcev1.GitRepositorySpec{
			URL:       env.GitBaseURL + "/" + s.ns + ".git",
			Reference: &sourcev1.GitRepositoryRef{Branch: "main"},
			// push asks for a fetch at once; the interval is the fallback.
			Interval: metav1.Duration{Duration: 30 * time.Second},
		},
	}
	if err := s.c.Create(s.ctx, gr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.cleanup)
	t.Cleanup(s.diagnose)
	return s
}

// push commits files (path → content) and the removal of the paths in
// remove, pushes, asks source-controller to fetch now (as `flux reconcile
// source git` does) and waits until the GitRepository's artifact is that
// commit. It returns the commit.
func (s *scenario) push(message string, files map[string]string, remove ...string) string {
	s.t.Helper()
	commit, err := s.repo.CommitAndPush(message, files, remove...)
	if err != nil {
		s.t.Fatal(err)
	}
	gr := &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: repoName}}
	if err := gitops.RequestReconcile(s.ctx, s.c, gr); err != nil {
		s.t.Fatal(err)
	}
	s.eventually("GitRepository "+repoName+" has commit "+commit, func(g Gomega) {
		g.Expect(s.c.Get(s.ctx, client.ObjectKeyFromObject(gr), gr)).To(Succeed())
		g.Expect(gr.Status.Artifact).NotTo(BeNil(), "no artifact yet")
		g.Expect(gr.Status.Artifact.Revision).To(HaveSuffix(commit))
	})
	return commit
}

// kustomization creates a Kustomization of path in the scenario's
// repository, with prune; extra adds or overrides spec fields.
func (s *scenario) kustomization(name, path string, extra map[string]any) {
	s.t.Helper()
	spec := map[string]any{
		"interval":      "1m",
		"retryInterval": "5s",
		"timeout":       "2m",
		"path":          path,
		"prune":         true,
		"sourceRef":     map[string]any{"kind": sourcev1.GitRepositoryKind, "name": repoName},
	}
	for k, v := range extra {
		spec[k] = v
	}
	if err := s.c.Create(s.ctx, gitops.NewKustomization(s.ns, name, spec)); err != nil {
		s.t.Fatalf("creating Kustomization %s: %v", name, err)
	}
}

// eventually polls check every second until it passes or waitTimeout ends.
func (s *scenario) eventually(what string, check func(g Gomega)) {
	s.t.Helper()
	s.eventuallyEvery(time.Second, what, check)
}

func (s *scenario) eventuallyEvery(polling time.Duration, what string, check func(g Gomega)) {
	s.t.Helper()
	NewWithT(s.t).Eventually(check).WithTimeout(waitTimeout).WithPolling(polling).Should(Succeed(), "waiting until "+what)
}

func (s *scenario) terraform(g Gomega, name string) *infrav1.Terraform {
	tf := &infrav1.Terraform{}
	g.ExpectWithOffset(1, s.c.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: name}, tf)).To(Succeed())
	return tf
}

func (s *scenario) getKustomization(g Gomega, name string) *unstructured.Unstructured {
	ks := gitops.Kustomization(s.ns, name)
	g.ExpectWithOffset(1, s.c.Get(s.ctx, client.ObjectKeyFromObject(ks), ks)).To(Succeed())
	return ks
}

func (s *scenario) secret(g Gomega, name string) *corev1.Secret {
	sec := &corev1.Secret{}
	g.ExpectWithOffset(1, s.c.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: name}, sec)).To(Succeed())
	return sec
}

// gone reports whether obj no longer exists.
func (s *scenario) gone(g Gomega, obj client.Object) bool {
	err := s.c.Get(s.ctx, client.ObjectKeyFromObject(obj), obj)
	g.ExpectWithOffset(1, client.IgnoreNotFound(err)).To(Succeed())
	return apierrors.IsNotFound(err)
}

// expectTerraformReady: Ready=True for the current generation.
func expectTerraformReady(g Gomega, tf *infrav1.Terraform) {
	g.ExpectWithOffset(1, tf.Status.ObservedGeneration).To(Equal(tf.Generation), "not reconciled at generation %d: %s", tf.Generation, testenv.Describe(tf))
	g.ExpectWithOffset(1, conditions.IsReady(tf)).To(BeTrue(), "not Ready: %s", testenv.Describe(tf))
}

// expectKustomizationReady: Ready=True for the current generation, with
// commit applied.
func expectKustomizationReady(g Gomega, ks *unstructured.Unstructured, commit string) {
	observed, _, _ := unstructured.NestedInt64(ks.Object, "status", "observedGeneration")
	applied, _, _ := unstructured.NestedString(ks.Object, "status", "lastAppliedRevision")
	g.ExpectWithOffset(1, observed).To(Equal(ks.GetGeneration()), "Kustomization %s not reconciled yet: %s", ks.GetName(), testenv.Describe(ks))
	ready := gitops.Condition(ks, meta.ReadyCondition)
	g.ExpectWithOffset(1, ready).NotTo(BeNil(), "Kustomization %s has no Ready condition", ks.GetName())
	g.ExpectWithOffset(1, ready.Status).To(Equal(metav1.ConditionTrue), "Kustomization %s not Ready: %s", ks.GetName(), testenv.Describe(ks))
	g.ExpectWithOffset(1, applied).To(HaveSuffix(commit), "Kustomization %s has not applied %s", ks.GetName(), commit)
}

// database is the stand-in cloud's database of that name, or nil.
func database(g Gomega, name string) *cloud.Database {
	dbs, err := cloudAPI.ListDatabases(context.Background())
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	for i := range dbs {
		if dbs[i].Name == name {
			return &dbs[i]
		}
	}
	return nil
}

// securityGroup is the stand-in cloud's security group of that name, or nil.
func securityGroup(g Gomega, name string) *cloud.SecurityGroup {
	sgs, err := cloudAPI.ListSecurityGroups(context.Background())
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	for i := range sgs {
		if sgs[i].Name == name {
			return &sgs[i]
		}
	}
	return nil
}

// events are the scenario's events about the object called name with
// reason.
func (s *scenario) events(g Gomega, name, reason string) []string {
	msgs, err := testenv.Events(s.ctx, s.c, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name}}, reason)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return msgs
}

// diagnose logs what a failed scenario's objects say about themselves.
func (s *scenario) diagnose() {
	if !s.t.Failed() {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "diagnostics of namespace %s (component logs in %s):\n", s.ns, filepath.Join(env.StateDir, "logs"))
	var tfs infrav1.TerraformList
	if err := s.c.List(s.ctx, &tfs, client.InNamespace(s.ns)); err == nil {
		for i := range tfs.Items {
			fmt.Fprintf(&b, "  Terraform %s: %s\n", tfs.Items[i].Name, testenv.Describe(&tfs.Items[i]))
		}
	}
	kss := gitops.KustomizationList()
	if err := s.c.List(s.ctx, kss, client.InNamespace(s.ns)); err == nil {
		for i := range kss.Items {
			fmt.Fprintf(&b, "  Kustomization %s: %s\n", kss.Items[i].GetName(), testenv.Describe(&kss.Items[i]))
		}
	}
	gr := &sourcev1.GitRepository{}
	if err := s.c.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: repoName}, gr); err == nil {
		fmt.Fprintf(&b, "  GitRepository %s: %s\n", repoName, testenv.Describe(gr))
	}
	var evs corev1.EventList
	if err := s.c.List(s.ctx, &evs, client.InNamespace(s.ns)); err == nil {
		slices.SortFunc(evs.Items, func(a, b corev1.Event) int { return a.LastTimestamp.Compare(b.LastTimestamp.Time) })
		for _, e := range evs.Items {
			fmt.Fprintf(&b, "  event %s %s/%s %s: %s\n", e.LastTimestamp.Format(time.TimeOnly), e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	s.t.Log(b.String())
}

// cleanup deletes the Kustomizations (kustomize-controller prunes what
// they applied) and the Terraform objects, and waits until Landform has
// finished with them: a destroy left running would load the other
// scenarios. The namespace stays (the environment has no namespace
// controller to empty it).
func (s *scenario) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	kss := gitops.KustomizationList()
	if err := s.c.List(ctx, kss, client.InNamespace(s.ns)); err != nil {
		s.t.Errorf("cleanup: %v", err)
		return
	}
	for i := range kss.Items {
		if err := s.c.Delete(ctx, &kss.Items[i]); client.IgnoreNotFound(err) != nil {
			s.t.Errorf("cleanup: %v", err)
		}
	}
	for {
		var tfs infrav1.TerraformList
		if err := s.c.List(ctx, &tfs, client.InNamespace(s.ns)); err != nil {
			s.t.Errorf("cleanup: %v", err)
			return
		}
		left := gitops.KustomizationList()
		if err := s.c.List(ctx, left, client.InNamespace(s.ns)); err != nil {
			s.t.Errorf("cleanup: %v", err)
			return
		}
		if len(tfs.Items) == 0 && len(left.Items) == 0 {
			return
		}
		var names []string
		for i := range tfs.Items {
			tf := &tfs.Items[i]
			names = append(names, fmt.Sprintf("Terraform %s (%s)", tf.Name, testenv.Describe(tf)))
			if tf.DeletionTimestamp.IsZero() {
				if err := s.c.Delete(ctx, tf); client.IgnoreNotFound(err) != nil {
					s.t.Errorf("cleanup: %v", err)
				}
			}
		}
		for i := range left.Items {
			names = append(names, "Kustomization "+left.Items[i].GetName())
		}
		select {
		case <-ctx.Done():
			s.t.Errorf("cleanup: still there after 3m: %s", strings.Join(names, "; "))
			return
		case <-time.After(time.Second):
		}
	}
}
