package controllers

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/cli"
	"github.com/landform-dev/landform/internal/custody"
	"github.com/landform-dev/landform/internal/runs"
	"github.com/landform-dev/landform/internal/testenv"
)

const (
	waitTimeout = 3 * time.Minute
	pollEvery   = 250 * time.Millisecond
)

// fileModule is the offline test module: a landform_file whose drift the
// provider sees, with string, number, map and sensitive outputs.
func fileModule() map[string]string {
	return moduleFiles(filepath.Join("..", "modules", "file"), "modules/file")
}

// newNamespace creates a namespace of its own for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := "t-" + hex.EncodeToString(b)
	NewWithT(t).Expect(k8sClient.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	return ns
}

// newGitRepository creates a GitRepository whose status carries artifact,
// as source-controller would report it.
func newGitRepository(t *testing.T, ns, name string, artifact *meta.Artifact) *sourcev1.GitRepository {
	t.Helper()
	ctx := context.Background()
	repo := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       sourcev1.GitRepositorySpec{URL: "https://example.invalid/repo.git", Interval: metav1.Duration{Duration: time.Hour}},
	}
	NewWithT(t).Expect(k8sClient.Create(ctx, repo)).To(Succeed())
	if artifact != nil {
		setArtifact(t, repo, artifact)
	}
	return repo
}

// repoOf is the GitRepository "repo" of ns.
func repoOf(t *testing.T, ns string) *sourcev1.GitRepository {
	repo := &sourcev1.GitRepository{}
	NewWithT(t).Expect(k8sClient.Get(context.Background(), keyOf(ns, "repo"), repo)).To(Succeed())
	return repo
}

// setArtifact publishes a new artifact on the source's status.
func setArtifact(t *testing.T, repo *sourcev1.GitRepository, artifact *meta.Artifact) {
	t.Helper()
	ctx := context.Background()
	NewWithT(t).Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(repo), repo)).To(Succeed())
	repo.Status.Artifact = artifact
	repo.Status.ObservedGeneration = repo.Generation
	conditions.MarkTrue(repo, meta.ReadyCondition, meta.SucceededReason, "stored artifact for revision %s", artifact.Revision)
	NewWithT(t).Expect(k8sClient.Status().Update(ctx, repo)).To(Succeed())
}

// newTerraform creates a Terraform object on repo's modules/file.
func newTerraform(t *testing.T, ns, name string, mutate func(*infrav1.Terraform)) *infrav1.Terraform {
	t.Helper()
	tf := fileTerraform(ns, name, mutate)
	NewWithT(t).Expect(k8sClient.Create(context.Background(), tf)).To(Succeed())
	return tf
}

// fileTerraform is the object newTerraform creates, not created yet (for
// a test that expects the API server to refuse it).
func fileTerraform(ns, name string, mutate func(*infrav1.Terraform)) *infrav1.Terraform {
	tf := &infrav1.Terraform{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: infrav1.TerraformSpec{
			SourceRef:     infrav1.SourceReference{Kind: sourcev1.GitRepositoryKind, Name: "repo"},
			Path:          "modules/file",
			Interval:      metav1.Duration{Duration: time.Hour},
			RetryInterval: &metav1.Duration{Duration: 2 * time.Second},
			ApprovePlan:   infrav1.ApprovePlanAuto,
		},
	}
	if mutate != nil {
		mutate(tf)
	}
	return tf
}

// newFileTerraform is most tests' start: GitRepository "repo" in ns
// serving the file module, and Terraform object name on it writing content
// to a fresh effectPath, then changed by mutate (nil: nothing more). It
// returns the object and the path.
func newFileTerraform(t *testing.T, ns, name, content string, mutate func(*infrav1.Terraform)) (*infrav1.Terraform, string) {
	t.Helper()
	newGitRepository(t, ns, "repo", artifacts.publish(fileModule()))
	path := effectPath(t)
	return newTerraform(t, ns, name, func(tf *infrav1.Terraform) {
		tf.Spec.Vars = fileVars(path, content)
		if mutate != nil {
			mutate(tf)
		}
	}), path
}

// manualApproval has the object's plans wait for an approval.
func manualApproval(tf *infrav1.Terraform) { tf.Spec.ApprovePlan = "" }

// effectPath is a fresh path for a test's external effect; suffixes name
// more than one.
func effectPath(t *testing.T, suffix ...string) string {
	name := strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, t.Name())
	// Unique per call: objects of an earlier run (-count) still manage theirs.
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return filepath.Join(effects, name+"-"+hex.EncodeToString(b)+strings.Join(suffix, "")+".txt")
}

// fileVars are the variables of modules/file.
func fileVars(path, content string) []infrav1.Variable {
	return []infrav1.Variable{{Name: "path", Value: testenv.JSONValue(path)}, {Name: "content", Value: testenv.JSONValue(content)}}
}

// get reads the object again.
func get(g Gomega, tf *infrav1.Terraform) *infrav1.Terraform {
	out := &infrav1.Terraform{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(tf), out)).To(Succeed())
	return out
}

// waitFor polls until check passes on the current object, then returns it.
func waitFor(t *testing.T, tf *infrav1.Terraform, check func(g Gomega, obj *infrav1.Terraform)) *infrav1.Terraform {
	t.Helper()
	var last *infrav1.Terraform
	NewWithT(t).Eventually(func(g Gomega) {
		last = get(g, tf)
		check(g, last)
	}).WithTimeout(waitTimeout).WithPolling(pollEvery).Should(Succeed(), func() string { return describe(last) })
	return last
}

// waitReady waits for Ready=True at the current generation with the
// attempted revision applied. (The status patch writes conditions and the
// other fields in two calls, so Ready alone may be seen a moment early.)
func waitReady(t *testing.T, tf *infrav1.Terraform) *infrav1.Terraform {
	t.Helper()
	return waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(obj.Status.ObservedGeneration).To(Equal(obj.Generation))
		g.Expect(conditions.IsReady(obj)).To(BeTrue(), "Ready")
		g.Expect(obj.Status.LastAppliedRevision).To(Equal(obj.Status.LastAttemptedRevision))
		g.Expect(obj.PendingPlan()).To(BeEmpty())
	})
}

// waitNotReady waits for Ready=False with reason.
func waitNotReady(t *testing.T, tf *infrav1.Terraform, reason string) *infrav1.Terraform {
	t.Helper()
	return waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		c := conditions.Get(obj, meta.ReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(reason))
	})
}

// readyReasonOf and readyMessageOf are what the object's Ready condition
// says.
func readyReasonOf(obj *infrav1.Terraform) string {
	return conditions.GetReason(obj, meta.ReadyCondition)
}
func readyMessageOf(obj *infrav1.Terraform) string {
	return conditions.GetMessage(obj, meta.ReadyCondition)
}

// waitPending waits for a plan waiting for approval, with its summary in
// status (conditions and the other status fields are written in two calls).
func waitPending(t *testing.T, tf *infrav1.Terraform) *infrav1.Terraform {
	t.Helper()
	return waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(readyReasonOf(obj)).To(Equal(infrav1.PlanPendingReason))
		g.Expect(obj.PendingPlan()).NotTo(BeEmpty())
	})
}

// describe prints an object's status for failure messages.
func describe(obj *infrav1.Terraform) string {
	if obj == nil {
		return "object not read yet"
	}
	b, _ := json.MarshalIndent(obj.Status, "", "  ")
	return fmt.Sprintf("status of %s/%s (generation %d):\n%s", obj.Namespace, obj.Name, obj.Generation, b)
}

// secretData reads a Secret's data, nil when it does not exist.
func secretData(g Gomega, ns, name string) map[string][]byte {
	s := &corev1.Secret{}
	err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return nil
	}
	g.Expect(err).NotTo(HaveOccurred())
	return s.Data
}

// readFile returns a file's content, or "<missing>".
func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "<missing>"
	}
	return string(b)
}

// deleteAndWait deletes the object and waits until it is gone.
func deleteAndWait(t *testing.T, tf *infrav1.Terraform) {
	t.Helper()
	NewWithT(t).Expect(k8sClient.Delete(context.Background(), tf)).To(Succeed())
	NewWithT(t).Eventually(func() bool {
		err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(tf), &infrav1.Terraform{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(waitTimeout).WithPolling(pollEvery).Should(BeTrue(), func() string { return describe(get(NewWithT(t), tf)) })
}

func keyOf(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

// updateSpec changes the object's spec, retrying on conflicts.
func updateSpec(t *testing.T, tf *infrav1.Terraform, mutate func(*infrav1.Terraform)) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		obj := &infrav1.Terraform{}
		if err := k8sClient.Get(context.Background(), keyOf(tf.Namespace, tf.Name), obj); err != nil {
			return err
		}
		mutate(obj)
		return k8sClient.Update(context.Background(), obj)
	}).WithTimeout(waitTimeout).Should(Succeed())
}

// annotate sets one annotation with a merge patch, touching nothing else.
func annotate(t *testing.T, obj *infrav1.Terraform, key, value string) {
	t.Helper()
	NewWithT(t).Expect(k8sClient.Patch(context.Background(), obj, annotationPatch(key, value))).To(Succeed())
}

// approve approves plan id of tf.
func approve(g Gomega, tf *infrav1.Terraform, id string) {
	g.Expect(k8sClient.Patch(context.Background(), get(g, tf), annotationPatch(infrav1.ApproveAnnotation, id))).To(Succeed())
}

func annotationPatch(key, value string) client.Patch {
	return rawMergePatch([]byte(`{"metadata":{"annotations":{"` + key + `":"` + value + `"}}}`))
}

// eventsIn lists the events in ns.
func eventsIn(g Gomega, ns string) []corev1.Event {
	var events corev1.EventList
	g.Expect(k8sClient.List(context.Background(), &events, client.InNamespace(ns))).To(Succeed())
	return events.Items
}

// hasEvent reports an event about name with reason whose message holds
// text.
func hasEvent(g Gomega, ns, name, reason, text string) bool {
	return slices.ContainsFunc(eventsIn(g, ns), eventAbout(name, reason, text))
}

// hasWarning reports a Warning event about name with reason whose message
// holds text.
func hasWarning(g Gomega, ns, name, reason, text string) bool {
	about := eventAbout(name, reason, text)
	return slices.ContainsFunc(eventsIn(g, ns), func(e corev1.Event) bool { return e.Type == corev1.EventTypeWarning && about(e) })
}

func eventAbout(name, reason, text string) func(corev1.Event) bool {
	return func(e corev1.Event) bool {
		return e.InvolvedObject.Name == name && e.Reason == reason && strings.Contains(e.Message, text)
	}
}

// countEvents counts the events about name with reason, each as often as
// it was recorded.
func countEvents(g Gomega, ns, name, reason string) int {
	n := 0
	for _, e := range eventsIn(g, ns) {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			n += int(max(e.Count, 1))
		}
	}
	return n
}

// eventsOf lists the events in ns, reason, count and message, for
// failure messages.
func eventsOf(g Gomega, ns string) string {
	out := ""
	for _, e := range eventsIn(g, ns) {
		out += fmt.Sprintf("%s x%d: %s\n", e.Reason, e.Count, e.Message)
	}
	return out
}

// rawMergePatch is a JSON merge patch.
func rawMergePatch(b []byte) client.Patch { return client.RawPatch(types.MergePatchType, b) }

// runCLI runs the landform CLI against the suite's API server in namespace
// ns, returning what it printed.
func runCLI(ns string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = cli.Execute(context.Background(), cli.Options{Streams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}},
		append([]string{"--kubeconfig", testKubeconfig, "-n", ns}, args...))
	return out.String(), errOut.String(), err
}

// withRuns gives r a state keeper and a run tracker (added to mgr) as
// internal/app gives the controller process its own: the suites cannot
// build theirs with internal/app, which imports this package.
func withRuns(mgr ctrl.Manager, r *TerraformReconciler, kube kubernetes.Interface, slots int) error {
	r.Custody = &custody.Keeper{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Objects: mgr.GetClient(), Namespaces: mgr.GetClient(),
		FieldOwner: FieldOwner,
		Leases:     kube.CoordinationV1().Leases,
		Secrets:    kube.CoreV1().Secrets,
		Artifacts:  r.Fetcher,
	}
	r.Runs = runs.New(runs.Config{
		Placer:  r.Placer,
		Tokens:  r.Custody,
		Unsaved: r.Custody.UnsavedStates(),
		Client:  mgr.GetClient(),
		Slots:   slots,
		Drain:   time.Minute,
		Collect: r,
		Log:     mgr.GetLogger().WithName("runs"),
	})
	return mgr.Add(r.Runs)
}
