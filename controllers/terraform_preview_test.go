package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/statelock"
)

// previewOf is a preview of ns/target planning content into path.
func previewOf(targetNS, target, path, content string) func(*infrav1.Terraform) {
	return func(tf *infrav1.Terraform) {
		tf.Spec.ApprovePlan = ""
		tf.Spec.Vars = fileVars(path, content)
		tf.Spec.Preview = &infrav1.PreviewSpec{StateFrom: &infrav1.PreviewTarget{Name: target, Namespace: targetNS}}
	}
}

// waitPreviewPlanned waits for a preview's plan, Ready with its reason.
func waitPreviewPlanned(t *testing.T, tf *infrav1.Terraform) *infrav1.Terraform {
	t.Helper()
	return waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(obj.Status.ObservedGeneration).To(Equal(obj.Generation))
		g.Expect(conditions.IsReady(obj)).To(BeTrue(), "Ready")
		g.Expect(obj.Status.Plan).NotTo(BeNil())
		g.Expect(obj.Status.Preview).NotTo(BeNil())
	})
}

// resourceVersion is the resourceVersion of a Secret or Lease.
func resourceVersion(g Gomega, o client.Object, ns, name string) string {
	g.Expect(k8sClient.Get(context.Background(), keyOf(ns, name), o)).To(Succeed())
	return o.GetResourceVersion()
}

// TestPreview: a preview plans its own inputs against a snapshot of the
// target's state, while the target holds its lock; it never touches the
// target's state or lock, never applies (not even an approved plan),
// plans again when the target applies, and its deletion deletes only its
// snapshot.
func TestPreview(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	target, path := newFileTerraform(t, ns, "app", "v1", nil)
	waitReady(t, target)
	g.Expect(readFile(path)).To(Equal("v1"))

	stateSecret, lease := names.StateSecret(target), names.StateLease(target)
	// Someone holds the target's lock the whole time previews plan (a
	// live process: nothing proves it gone).
	me, err := statelock.CurrentProcess()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = statelock.Acquire(context.Background(), kubeClientset.CoordinationV1().Leases(ns), lease,
		statelock.Holder{Run: "run-elsewhere", Tool: "someone's tofu", Process: me}, statelock.OperationApply)
	g.Expect(err).NotTo(HaveOccurred())
	secretRV := resourceVersion(g, &corev1.Secret{}, ns, stateSecret)
	leaseRV := resourceVersion(g, &coordinationv1.Lease{}, ns, lease)

	// Three previews of one target plan at once, under its held lock.
	pr7 := newTerraform(t, ns, "app-pr-7", previewOf("", "app", path, "v2"))
	pr8 := newTerraform(t, ns, "app-pr-8", previewOf("", "app", path, "v1"))
	pr9 := newTerraform(t, ns, "app-pr-9", previewOf("", "app", path, "v9"))
	obj := waitPreviewPlanned(t, pr7)
	g.Expect(waitPreviewPlanned(t, pr9).Status.Plan.Pending).NotTo(BeEmpty())
	g.Expect(stateLock(g, ns, "app")).NotTo(BeNil(), "the target's lock is still held")
	g.Expect(readyMessageOf(obj)).To(ContainSubstring("preview plan " + obj.Status.Plan.ID))
	g.Expect(obj.Spec.Preview.Summary).To(Equal(infrav1.PreviewSummary{MaxAddresses: 20, Errors: infrav1.PreviewErrorsRedacted}),
		"a summary left out is defaulted whole")
	g.Expect(obj.Status.Plan.Change + obj.Status.Plan.Add).To(BeNumerically(">", 0))
	g.Expect(obj.Status.Preview.Target).To(Equal(ns + "/app"))
	g.Expect(obj.Status.Preview.StateSerial).To(BeNumerically(">", 0))
	g.Expect(obj.Status.Preview.StateLineage).NotTo(BeEmpty())
	g.Expect(obj.Status.Preview.TargetAppliedPlan).To(Equal(get(g, target).Status.LastAppliedPlan))
	same := waitPreviewPlanned(t, pr8)
	g.Expect(same.Status.Plan.Pending).To(BeEmpty(), "the same inputs against the same state change nothing")
	g.Expect(same.Status.LastAppliedRevision).To(BeEmpty(), "nothing of a preview is ever in effect")
	g.Expect(same.Status.Preview.StateDigest).To(Equal(obj.Status.Preview.StateDigest))

	// The preview's state is its own copy.
	g.Expect(secretData(g, ns, names.StateSecret(obj))["tfstate"]).To(Equal(secretData(g, ns, stateSecret)["tfstate"]))
	g.Expect(resourceVersion(g, &corev1.Secret{}, ns, stateSecret)).To(Equal(secretRV), "the target's state was only read")
	g.Expect(resourceVersion(g, &coordinationv1.Lease{}, ns, lease)).To(Equal(leaseRV), "the target's lock was never touched")

	// The PlanPreview event: Markdown, the address, never a value.
	g.Eventually(func(g Gomega) {
		ev := eventsFor(g, ns, "app-pr-7", infrav1.PlanPreviewReason)
		g.Expect(ev).To(HaveLen(1))
		g.Expect(ev[0].Message).To(ContainSubstring("**Plan `" + obj.Status.Plan.ID + "`**"))
		g.Expect(ev[0].Message).To(ContainSubstring("`landform_file.this`"))
		g.Expect(ev[0].Message).To(ContainSubstring("against `" + ns + "/app` (state serial"))
		g.Expect(ev[0].Message).NotTo(ContainSubstring("v2"))
	}).WithTimeout(waitTimeout).Should(Succeed())

	// The CLI: get marks previews, status says what the snapshot was,
	// plan show shows the whole plan.
	out, errOut, err := runCLI(ns, "get")
	g.Expect(err).NotTo(HaveOccurred(), errOut)
	g.Expect(out).To(MatchRegexp(`app-pr-7 .* preview ` + obj.Status.Plan.ID))
	out, errOut, err = runCLI(ns, "status", "app-pr-7")
	g.Expect(err).NotTo(HaveOccurred(), errOut)
	g.Expect(out).To(ContainSubstring("Approval:    none: a preview"))
	g.Expect(out).To(MatchRegexp(`Preview: +of ` + ns + `/app: state serial \d+, after plan ` + obj.Status.Preview.TargetAppliedPlan))
	out, errOut, err = runCLI(ns, "plan", "show", "app-pr-7")
	g.Expect(err).NotTo(HaveOccurred(), errOut)
	g.Expect(out).To(ContainSubstring("landform_file.this"))
	_, errOut, err = runCLI(ns, "approve", "app-pr-7", "--yes")
	g.Expect(err).To(MatchError(ContainSubstring("is a preview (spec.preview): its plans are never applied")), errOut)

	// An approval of the preview's plan applies nothing.
	annotate(t, pr7, infrav1.ApproveAnnotation, obj.Status.Plan.ID)
	requested := time.Now().Format(time.RFC3339Nano)
	annotate(t, pr7, meta.ReconcileRequestAnnotation, requested)
	waitFor(t, pr7, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(obj.Status.LastHandledReconcileAt).To(Equal(requested))
		g.Expect(obj.Status.Run).To(BeNil())
		g.Expect(conditions.IsReady(obj)).To(BeTrue())
	})
	g.Expect(readFile(path)).To(Equal("v1"), "a preview never applies")
	g.Expect(get(g, pr7).Status.LastAppliedPlan).To(BeEmpty())

	// The target applies a new state: the preview plans against it.
	out, errOut, err = runCLI(ns, "unlock", "--force", "app")
	g.Expect(err).NotTo(HaveOccurred(), out+errOut)
	before := get(g, pr7).Status.Preview
	updateSpec(t, target, func(tf *infrav1.Terraform) { tf.Spec.Vars = fileVars(path, "v3") })
	waitReady(t, target)
	g.Expect(readFile(path)).To(Equal("v3"))
	obj = waitFor(t, pr7, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(obj.Status.Preview.StateSerial).To(BeNumerically(">", before.StateSerial))
		g.Expect(obj.Status.Preview.TargetAppliedPlan).To(Equal(get(g, target).Status.LastAppliedPlan))
		g.Expect(obj.Status.Plan.Pending).NotTo(BeEmpty())
		g.Expect(conditions.IsReady(obj)).To(BeTrue())
	})
	g.Expect(hasEvent(g, ns, "app-pr-7", infrav1.PreviewStateStaleReason, "planning this preview again")).To(BeTrue())
	g.Eventually(func() []corev1.Event { return eventsFor(g, ns, "app-pr-7", infrav1.PlanPreviewReason) }).
		WithTimeout(waitTimeout).Should(HaveLen(2), "one summary per plan")

	// Deleting a preview deletes its snapshot and destroys nothing.
	snapshot := names.StateSecret(obj)
	deleteAndWait(t, pr7)
	deleteAndWait(t, pr8)
	deleteAndWait(t, pr9)
	g.Expect(readFile(path)).To(Equal("v3"), "nothing destroyed")
	g.Expect(secretData(g, ns, snapshot)).To(BeNil(), "the snapshot went with the preview")
	g.Expect(secretData(g, ns, stateSecret)).NotTo(BeNil())
	g.Expect(countEvents(g, ns, "app-pr-7", infrav1.DestroyFailedReason)).To(Equal(0))
	waitReady(t, target)
}

// eventsFor are the events of reason about object name.
func eventsFor(g Gomega, ns, name, reason string) []corev1.Event {
	var out []corev1.Event
	for _, e := range eventsIn(g, ns) {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// TestPreviewRefusals: what a preview cannot have is refused by the API
// server; another namespace's state only where that namespace grants it;
// a preview-only namespace runs nothing that is no preview.
func TestPreviewRefusals(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	target, path := newFileTerraform(t, ns, "app", "v1", nil)

	for field, mutate := range map[string]func(*infrav1.Terraform){
		"approvePlan": func(tf *infrav1.Terraform) { tf.Spec.ApprovePlan = infrav1.ApprovePlanAuto },
		"writeOutputsToSecret": func(tf *infrav1.Terraform) {
			tf.Spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{Name: "out"}
		},
		"destroy":       func(tf *infrav1.Terraform) { tf.Spec.Destroy = true },
		"backendConfig": func(tf *infrav1.Terraform) { tf.Spec.BackendConfig = &infrav1.BackendConfig{SecretSuffix: "app"} },
	} {
		tf := fileTerraform(ns, "bad", previewOf("", "app", path, "v2"))
		mutate(tf)
		err := k8sClient.Create(ctx, tf)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", field, err)
		g.Expect(err.Error()).To(ContainSubstring("a preview is never applied"), field)
	}
	waitReady(t, target)

	// Another namespace: refused until the target's namespace grants it.
	other := newNamespace(t)
	newGitRepository(t, other, "repo", artifacts.publish(fileModule()))
	away := newTerraform(t, other, "app-pr-1", previewOf(ns, "app", path, "v2"))
	obj := waitNotReady(t, away, infrav1.CrossNamespaceRefDeniedReason)
	g.Expect(readyMessageOf(obj)).To(ContainSubstring("kubectl label namespace " + ns + " infra.landform.dev/previews-from=" + other))
	g.Expect(conditions.IsStalled(obj)).To(BeTrue())
	labelNamespace(t, ns, infrav1.PreviewsFromLabel, other)
	obj = waitPreviewPlanned(t, away)
	g.Expect(obj.Status.Preview.Target).To(Equal(ns + "/app"))

	// A target that does not exist yet is waited for.
	missing := newTerraform(t, other, "app-pr-2", previewOf("", "nothing", path, "v2"))
	waitNotReady(t, missing, infrav1.PreviewTargetNotFoundReason)

	// A preview-only namespace: an object that is no preview never runs.
	labelNamespace(t, other, infrav1.PreviewOnlyLabel, "true")
	stray := newTerraform(t, other, "stray", func(tf *infrav1.Terraform) { tf.Spec.Vars = fileVars(effectPath(t), "x") })
	obj = waitNotReady(t, stray, infrav1.PreviewOnlyNamespaceReason)
	g.Expect(readyMessageOf(obj)).To(ContainSubstring("admits only previews"))
	g.Expect(obj.Status.Run).To(BeNil())
	g.Expect(obj.Status.Plan).To(BeNil(), "nothing ran")
	g.Expect(strings.Contains(readFile(path), "x")).To(BeFalse())
}

// labelNamespace sets a label on a namespace, and returns once the
// controller's cache, from which it reads namespaces, has it.
func labelNamespace(t *testing.T, ns, key, value string) {
	t.Helper()
	g := NewWithT(t)
	n := &corev1.Namespace{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Name: ns}, n)).To(Succeed())
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[key] = value
	g.Expect(k8sClient.Update(context.Background(), n)).To(Succeed())
	seen := &metav1.PartialObjectMetadata{}
	seen.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	g.Eventually(func() string {
		_ = controllerView.Get(context.Background(), client.ObjectKey{Name: ns}, seen)
		return seen.Labels[key]
	}, 10*time.Second, 10*time.Millisecond).Should(Equal(value), "the controller's cache sees label %s", key)
}
