package controllers

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/testenv"
)

// countedModule is a terraform_data whose create and destroy each append a
// line to var.effects, so that a test counts what really ran. It is
// replaced whenever trigger changes; lifecycle goes into its body.
func countedModule(trigger, lifecycle string) string {
	return fmt.Sprintf(`
variable "effects" { type = string }
resource "terraform_data" "this" {
  input            = var.effects
  triggers_replace = [%q]
  provisioner "local-exec" {
    command = "echo created >> ${self.input}"
  }
  provisioner "local-exec" {
    when    = destroy
    command = "echo destroyed >> ${self.input}"
  }
%s}
`, trigger, lifecycle)
}

// replacedModule is countedModule, replaced whenever generation changes: a
// commit that changes an immutable argument.
func replacedModule(generation string) map[string]string {
	return map[string]string{"modules/replaced/main.tf": countedModule(generation, "")}
}

// driftReplacedModule is countedModule, replaced when landform_file.watched
// changes (replace_triggered_by): a file edited out of band is a drift whose
// repair replaces the resource.
func driftReplacedModule() map[string]string {
	files := fileModule()
	for name := range files {
		if !strings.HasSuffix(name, "versions.tf") {
			delete(files, name)
		}
	}
	files["modules/file/main.tf"] = `
variable "watched" { type = string }
resource "landform_file" "watched" {
  path    = var.watched
  content = "desired"
}
` + countedModule("one", `  lifecycle {
    replace_triggered_by = [landform_file.watched]
  }
`)
	return files
}

// effectCounts counts the creates and destroys recorded in an effects file.
func effectCounts(path string) (created, destroyed int) {
	lines := readFile(path)
	return strings.Count(lines, "created\n"), strings.Count(lines, "destroyed\n")
}

// waitDestructivePending waits until a plan is held because it destroys or
// replaces resources, and checks what its conditions say.
func waitDestructivePending(t *testing.T, tf *infrav1.Terraform, address string) *infrav1.Terraform {
	t.Helper()
	obj := waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(readyReasonOf(obj)).To(Equal(infrav1.DestructivePlanPendingReason))
		g.Expect(obj.PendingPlan()).NotTo(BeEmpty())
		g.Expect(obj.Status.Plan.ResourcesToReplace).NotTo(BeEmpty())
	})
	g := NewWithT(t)
	pending := obj.PendingPlan()
	g.Expect(conditions.IsFalse(obj, meta.ReadyCondition)).To(BeTrue())
	g.Expect(conditions.IsTrue(obj, meta.StalledCondition)).To(BeFalse(), "a wait, not a stall")
	ready := readyMessageOf(obj)
	g.Expect(ready).To(ContainSubstring("replaces " + address))
	g.Expect(ready).To(ContainSubstring(infrav1.ApproveAnnotation + "=" + pending))
	g.Expect(ready).To(ContainSubstring("spec.autoApproveDestructive"))
	g.Expect(conditions.GetReason(obj, infrav1.PlannedCondition)).To(Equal(infrav1.DestructivePlanPendingReason))
	g.Expect(conditions.GetMessage(obj, infrav1.PlannedCondition)).To(ContainSubstring("replaces " + address))
	g.Expect(obj.Status.Plan.Replace).To(Equal(int32(1)), describe(obj))
	g.Expect(obj.Status.Plan.ResourcesToReplace).To(Equal([]string{address}))
	g.Expect(obj.Status.Plan.ResourcesToDestroy).To(BeEmpty())
	g.Eventually(func(g Gomega) {
		g.Expect(hasWarning(g, tf.Namespace, tf.Name, infrav1.DestructivePlanPendingReason, "replaces "+address)).To(BeTrue(), eventsOf(g, tf.Namespace))
	}).WithTimeout(waitTimeout).WithPolling(pollEvery).Should(Succeed(), "a Warning event names the resources")
	return obj
}

// approvePlan: auto applies no plan that replaces a resource: a commit that
// forces a replacement waits with DestructivePlanPending, the addresses in
// its conditions, a Warning event and the CLI, and nothing is destroyed;
// approving that plan id applies it (one destroy, one create); with
// spec.autoApproveDestructive the next replacement is applied at once.
func TestAutoApprovalHoldsAPlanThatReplaces(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	repo := newGitRepository(t, ns, "repo", artifacts.publish(replacedModule("one")))
	effects := effectPath(t)
	tf := newTerraform(t, ns, "replaced", func(tf *infrav1.Terraform) {
		tf.Spec.Path = "modules/replaced"
		tf.Spec.Vars = []infrav1.Variable{{Name: "effects", Value: testenv.JSONValue(effects)}}
	})
	first := waitReady(t, tf).Status.LastAppliedPlan
	g.Expect(readFile(effects)).To(Equal("created\n"), "a plan that only creates is applied at once")

	// A commit that forces a replacement.
	setArtifact(t, repo, artifacts.publish(replacedModule("two")))
	obj := waitDestructivePending(t, tf, "terraform_data.this")
	pending := obj.PendingPlan()
	g.Expect(obj.Status.LastAppliedPlan).To(Equal(first))
	g.Expect(obj.Status.Plan.Add).To(Equal(int32(1)))
	g.Expect(obj.Status.Plan.Destroy).To(Equal(int32(1)))
	g.Expect(obj.Status.Plan.IsDrift).To(BeFalse())
	g.Consistently(func() string { return readFile(effects) }).WithTimeout(3*time.Second).Should(Equal("created\n"), "nothing destroyed")

	// The CLI says why it waits.
	out, _, err := runCLI(ns, "status", tf.Name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("waits for approval: it destroys or replaces resources"))
	g.Expect(out).To(ContainSubstring("replace:   terraform_data.this"))
	out, _, err = runCLI(ns, "plan", "show", tf.Name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("it replaces terraform_data.this, which approvePlan auto leaves to a person"))

	// Approving exactly that plan applies it.
	annotate(t, obj, infrav1.ApproveAnnotation, pending)
	obj = waitReady(t, tf)
	g.Expect(obj.Status.LastAppliedPlan).To(Equal(pending))
	g.Expect(conditions.GetReason(obj, infrav1.PlannedCondition)).To(Equal(infrav1.PlannedWithChangesReason), "it waits no more")
	g.Expect(conditions.GetMessage(obj, infrav1.PlannedCondition)).NotTo(ContainSubstring("waits"))
	created, destroyed := effectCounts(effects)
	g.Expect([]int{created, destroyed}).To(Equal([]int{2, 1}), "one destroy, one create: %q", readFile(effects))

	// The opt-out: the next replacement is applied without a person.
	updateSpec(t, tf, func(tf *infrav1.Terraform) { tf.Spec.AutoApproveDestructive = true })
	waitReady(t, tf)
	held := countEvents(g, ns, tf.Name, infrav1.DestructivePlanPendingReason)
	setArtifact(t, repo, artifacts.publish(replacedModule("three")))
	obj = waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(obj.Status.LastAppliedRevision).To(Equal(obj.Status.LastAttemptedRevision))
		g.Expect(obj.Status.LastAppliedPlan).NotTo(Equal(pending))
		g.Expect(conditions.IsReady(obj)).To(BeTrue())
	})
	g.Expect(obj.Status.Plan.Replace).To(Equal(int32(1)), "it was a replacement")
	g.Expect(conditions.GetReason(obj, infrav1.PlannedCondition)).To(Equal(infrav1.PlannedWithChangesReason), "the approval left from the last plan is no mismatch")
	created, destroyed = effectCounts(effects)
	g.Expect([]int{created, destroyed}).To(Equal([]int{3, 2}), "%q", readFile(effects))
	g.Expect(countEvents(g, ns, tf.Name, infrav1.DestructivePlanPendingReason)).To(Equal(held), "not held")
}

// A drift whose repair replaces a resource waits too: the file edited out
// of band is not repaired, nothing destroyed, until that plan is approved.
func TestAutoApprovalHoldsADriftRepairThatReplaces(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	newGitRepository(t, ns, "repo", artifacts.publish(driftReplacedModule()))
	effects, watched := effectPath(t), effectPath(t, "-watched")
	tf := newTerraform(t, ns, "drift-replaced", func(tf *infrav1.Terraform) {
		tf.Spec.Interval = metav1.Duration{Duration: 3 * time.Second}
		tf.Spec.Vars = []infrav1.Variable{
			{Name: "effects", Value: testenv.JSONValue(effects)},
			{Name: "watched", Value: testenv.JSONValue(watched)},
		}
	})
	waitReady(t, tf)
	g.Expect(readFile(effects)).To(Equal("created\n"))
	g.Expect(readFile(watched)).To(Equal("desired"))

	g.Expect(os.WriteFile(watched, []byte("changed by hand"), 0o644)).To(Succeed())
	obj := waitDestructivePending(t, tf, "terraform_data.this")
	g.Expect(obj.Status.Plan.IsDrift).To(BeTrue())
	g.Expect(conditions.IsTrue(obj, infrav1.DriftedCondition)).To(BeTrue())
	g.Consistently(func() string { return readFile(effects) }).WithTimeout(3*time.Second).Should(Equal("created\n"), "nothing destroyed")
	g.Expect(readFile(watched)).To(Equal("changed by hand"), "not repaired without approval")

	annotate(t, obj, infrav1.ApproveAnnotation, obj.PendingPlan())
	obj = waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(obj.Status.LastAppliedPlan).To(Equal(obj.Annotations[infrav1.ApproveAnnotation]))
		g.Expect(conditions.IsReady(obj)).To(BeTrue())
	})
	g.Expect(conditions.IsFalse(obj, infrav1.DriftedCondition)).To(BeTrue(), "drift repaired")
	g.Expect(readFile(watched)).To(Equal("desired"))
	created, destroyed := effectCounts(effects)
	g.Expect([]int{created, destroyed}).To(Equal([]int{2, 1}), "one destroy, one create: %q", readFile(effects))
}
