package controllers

import (
	"context"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/runlog"
)

// An auto-approved object plans, applies, writes its outputs and becomes Ready.
func TestAutoApproveAppliesAndWritesOutputs(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	tf, path := newFileTerraform(t, ns, "auto", "hello", func(tf *infrav1.Terraform) {
		tf.Spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{
			Name:    "auto-outputs",
			Outputs: []string{"path", "content_length:length", "meta"},
			Labels:  map[string]string{"team": "a"},
		}
	})

	obj := waitReady(t, tf)
	g.Expect(readFile(path)).To(Equal("hello"), "the module's external effect")
	g.Expect(obj.Status.LastAppliedRevision).To(Equal(obj.Status.LastAttemptedRevision))
	g.Expect(obj.Status.LastAppliedPlan).To(MatchRegexp(`^plan-[a-z0-9]{10}-[a-f0-9]{10}$`))
	g.Expect(obj.Status.Plan.Pending).To(BeEmpty())
	g.Expect(obj.Status.Plan.Add).To(Equal(int32(1)))
	g.Expect(obj.Status.Plan.Resources).To(ConsistOf("landform_file.this"))
	g.Expect(obj.Status.AvailableOutputs).To(ConsistOf("content_length", "meta", "path", "secret", "sha256"))
	g.Expect(conditions.IsTrue(obj, infrav1.AppliedCondition)).To(BeTrue())
	g.Expect(conditions.GetReason(obj, infrav1.OutputsWrittenCondition)).To(Equal(infrav1.OutputsWrittenReason))
	g.Expect(obj.Finalizers).To(ContainElement(infrav1.Finalizer))

	data := secretData(g, ns, "auto-outputs")
	g.Expect(data).To(HaveLen(3))
	g.Expect(string(data["path"])).To(Equal(path), "strings are written raw")
	g.Expect(string(data["length"])).To(Equal("5"), "numbers as JSON, under the alias")
	g.Expect(data["meta"]).To(MatchJSON(`{"path":"`+path+`","bytes":5}`), "maps as JSON")

	out := &corev1.Secret{}
	g.Expect(k8sClient.Get(context.Background(), keyOf(ns, "auto-outputs"), out)).To(Succeed())
	g.Expect(out.Labels).To(HaveKeyWithValue("team", "a"))
	g.Expect(metav1.GetControllerOf(out).UID).To(Equal(obj.UID), "Landform owns the outputs Secret")

	g.Expect(secretData(g, ns, "tfstate-default-auto")).NotTo(BeNil(), "state in the kubernetes backend")

	// The last run's output is kept per phase for `landform logs`.
	logs, err := runlog.Read(context.Background(), k8sClient, ns, "auto")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(logs[runlog.PhasePlan].State).To(Equal(runlog.StateSucceeded))
	g.Expect(logs[runlog.PhasePlan].Text).To(ContainSubstring("landform_file.this will be created"))
	g.Expect(logs[runlog.PhaseApply].State).To(Equal(runlog.StateSucceeded))
	g.Expect(logs[runlog.PhaseApply].Text).To(ContainSubstring("Apply complete!"))
	g.Expect(logs).NotTo(HaveKey(runlog.PhaseDestroy))
}

// A new source revision is planned and applied, and the outputs follow.
func TestNewRevisionReplansAndUpdatesOutputs(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	repo := newGitRepository(t, ns, "repo", artifacts.publish(fileModule()))
	path := effectPath(t)
	tf := newTerraform(t, ns, "rev", func(tf *infrav1.Terraform) {
		tf.Spec.Vars = fileVars(path, "one")
		tf.Spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{Name: "rev-outputs", Outputs: []string{"content_length", "extra"}}
	})
	// The first revision has no output "extra": the outputs selection fails
	// until the next revision adds it.
	obj := waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(readyReasonOf(obj)).To(Equal(infrav1.OutputsFailedReason))
		g.Expect(obj.Status.LastAppliedRevision).NotTo(BeEmpty())
	})
	g.Expect(readyMessageOf(obj)).To(ContainSubstring(`"extra"`))
	first := obj.Status.LastAppliedRevision
	g.Expect(readFile(path)).To(Equal("one"))

	files := fileModule()
	files["modules/file/extra.tf"] = `output "extra" { value = "from revision two" }`
	setArtifact(t, repo, artifacts.publish(files))

	obj = waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(obj.Status.LastAppliedRevision).NotTo(Equal(first))
		g.Expect(conditions.IsReady(obj)).To(BeTrue())
	})
	g.Expect(obj.Status.LastAppliedRevision).To(Equal(obj.Status.LastAttemptedRevision))
	data := secretData(g, ns, "rev-outputs")
	g.Expect(string(data["extra"])).To(Equal("from revision two"))
	g.Expect(string(data["content_length"])).To(Equal("3"))

	// A spec change is a new plan too.
	obj.Spec.Vars = fileVars(path, "three!")
	g.Expect(k8sClient.Update(context.Background(), obj)).To(Succeed())
	waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(conditions.IsReady(obj)).To(BeTrue())
		g.Expect(obj.Status.ObservedGeneration).To(Equal(obj.Generation))
		g.Expect(string(secretData(g, ns, "rev-outputs")["content_length"])).To(Equal("6"))
	})
	g.Expect(readFile(path)).To(Equal("three!"))

	// A revision that changes nothing is in effect once planned.
	files["modules/file/NOTES.md"] = "documentation only"
	docs := artifacts.publish(files)
	setArtifact(t, repo, docs)
	obj = waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(obj.Status.LastPlannedRevision).To(Equal(docs.Revision))
		g.Expect(conditions.IsReady(obj)).To(BeTrue())
	})
	g.Expect(conditions.GetReason(obj, infrav1.PlannedCondition)).To(Equal(infrav1.PlannedNoChangesReason))
	g.Expect(obj.Status.LastAppliedRevision).To(Equal(docs.Revision))
	g.Expect(readyMessageOf(obj)).To(ContainSubstring(docs.Revision))
}
