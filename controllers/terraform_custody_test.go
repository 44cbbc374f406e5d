package controllers

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/statehistory"
	"github.com/landform-dev/landform/internal/tfstate"
)

// countModule creates one terraform_data per content (a new content
// replaces it) and appends a line to a file each time it creates one: the
// file counts the creates.
const countModule = `
variable "path" { type = string }
variable "content" { type = string }
resource "terraform_data" "this" {
  triggers_replace = var.content
  provisioner "local-exec" {
    command = "echo ${self.triggers_replace} >> ${var.path}"
  }
}
`

func newCountTerraform(t *testing.T, ns, name, content string, mutate func(*infrav1.Terraform)) (*infrav1.Terraform, string) {
	t.Helper()
	path := effectPath(t, "-"+name)
	return newTerraform(t, ns, name, func(tf *infrav1.Terraform) {
		tf.Spec.Path = "modules/count"
		tf.Spec.Vars = fileVars(path, content)
		// A new content replaces the resource: not held under auto.
		tf.Spec.AutoApproveDestructive = true
		if mutate != nil {
			mutate(tf)
		}
	}), path
}

func countRepo(t *testing.T, ns string) {
	newGitRepository(t, ns, "repo", artifacts.publish(map[string]string{"modules/count/main.tf": countModule}))
}

// A second object whose backendConfig.secretSuffix names the first
// object's state (tofu-controller's branch planner's pattern) is refused
// before it plans, naming the owner; deleting it destroys nothing and
// leaves the owner's state, which goes on working.
func TestASecondObjectOnOneStateIsRefused(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	countRepo(t, ns)
	db, path := newCountTerraform(t, ns, "db", "one", nil)
	waitReady(t, db)
	g.Expect(readFile(path)).To(Equal("one\n"))
	stateBefore := secretData(g, ns, names.StateSecret(db))

	preview, _ := newCountTerraform(t, ns, "db-preview", "one", func(tf *infrav1.Terraform) {
		tf.Spec.PlanOnly = true
		tf.Spec.BackendConfig = &infrav1.BackendConfig{SecretSuffix: "db"}
	})
	obj := waitFor(t, preview, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(conditions.IsStalled(obj)).To(BeTrue(), describe(obj))
		g.Expect(readyReasonOf(obj)).To(Equal(infrav1.StateOwnedElsewhereReason))
	})
	g.Expect(readyMessageOf(obj)).To(ContainSubstring("Secret tfstate-default-db is the state of Terraform " + ns + "/db"))
	g.Expect(obj.Status.Plan).To(BeNil(), "nothing planned")

	deleteAndWait(t, preview)
	g.Expect(hasEvent(g, ns, "db-preview", infrav1.StateOwnedElsewhereReason, "deletion destroys nothing and keeps Secret tfstate-default-db")).To(BeTrue(), eventsOf(g, ns))
	g.Expect(secretData(g, ns, names.StateSecret(db))).To(Equal(stateBefore), "the owner's state is untouched")
	g.Expect(readFile(path)).To(Equal("one\n"), "nothing destroyed, nothing created again")

	updateSpec(t, db, func(obj *infrav1.Terraform) { obj.Spec.Vars = fileVars(path, "two") })
	g.Eventually(func() string { return readFile(path) }).WithTimeout(waitTimeout).Should(Equal("one\ntwo\n"), "the owner still applies")
	waitReady(t, db)
}

// Object hx keeps versions of its state; an object named hx-v1 created
// after them plans from a state of its own (it creates its resource),
// and hx's kept versions and hx-v1's state stay apart.
func TestAnObjectNamedLikeAKeptVersionHasItsOwnState(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	countRepo(t, ns)
	hx, hxPath := newCountTerraform(t, ns, "hx", "one", nil)
	waitReady(t, hx)
	for _, content := range []string{"two", "three"} {
		updateSpec(t, hx, func(obj *infrav1.Terraform) { obj.Spec.Vars = fileVars(hxPath, content) })
		g.Eventually(func() string { return readFile(hxPath) }).WithTimeout(waitTimeout).Should(HaveSuffix(content + "\n"))
		waitReady(t, hx)
	}
	versions, err := statehistory.List(context.Background(), k8sClient, get(g, hx))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(versions).To(HaveLen(2))
	for _, v := range versions {
		g.Expect(v.Secret).To(HavePrefix("tfhistory-hx-"))
	}

	hxv1, path := newCountTerraform(t, ns, "hx-v1", "own", nil)
	waitReady(t, hxv1)
	g.Expect(readFile(path)).To(Equal("own\n"), "hx-v1 created its own resource once")
	state := secretData(g, ns, "tfstate-default-hx-v1")
	raw, err := tfstate.Decompress(state[tfstate.DataKey])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(raw)).To(ContainSubstring(`"own"`))
	g.Expect(string(raw)).NotTo(ContainSubstring(`"three"`), "not hx's state")

	deleteAndWait(t, hx)
	g.Expect(secretData(g, ns, "tfstate-default-hx-v1")).To(Equal(state), "deleting hx leaves hx-v1's state")
}

// An apply that failed or was lost may have changed resources the state
// does not show: the approval it used is spent. Here the runner is killed
// mid-create, before the engine wrote the state: the plan made after it,
// the same changes from the same state, has an id of its own and waits
// for its own approval, and the condition says why the old one no longer
// applies; nothing is created again until a person approves.
func TestAnApprovalOfALostApplyIsSpent(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	newGitRepository(t, ns, "repo", artifacts.publish(slowModule()))
	path := effectPath(t)
	tf := newTerraform(t, ns, "spent", func(tf *infrav1.Terraform) {
		slow(tf, path, 6)
		manualApproval(tf)
	})
	lost := waitPending(t, tf).PendingPlan()
	approve(g, tf, lost)

	_, holder := createUnderWay(g, ns, tf.Name, path)
	g.Expect(syscall.Kill(holder.Process.PID, syscall.SIGKILL)).To(Succeed())

	obj := waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(obj.Status.LastFailedApplyPlan).To(Equal(lost))
		g.Expect(readyReasonOf(obj)).To(Equal(infrav1.PlanPendingReason))
		g.Expect(obj.PendingPlan()).NotTo(BeEmpty())
	})
	again := obj.PendingPlan()
	g.Expect(again).NotTo(Equal(lost), "the same changes from the same state, planned after the lost apply, have an id of their own")
	g.Expect(obj.Status.Plan.Add).To(BeEquivalentTo(1))
	g.Expect(conditions.GetReason(obj, infrav1.PlannedCondition)).To(Equal(infrav1.ApprovalMismatchReason))
	g.Expect(conditions.GetMessage(obj, infrav1.PlannedCondition)).To(ContainSubstring("was used by an apply that failed or was lost"))
	g.Consistently(func() int { return creates(path) }).WithTimeout(4*time.Second).Should(Equal(1), "nothing applied on the spent approval")

	approve(g, tf, again)
	waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(obj.Status.LastAppliedPlan).To(Equal(again))
		g.Expect(obj.Status.LastFailedApplyPlan).To(BeEmpty(), "cleared by the apply that succeeded")
		g.Expect(conditions.IsReady(obj)).To(BeTrue())
	})
	g.Expect(creates(path)).To(Equal(2), "created again, once approved: the lost create never reached the state")
}

// An approval is used once: after `landform state restore` brings back
// the state an approved plan was applied to, the plan made from it plans
// the same changes from the same state, and gets another id: the
// approval that named the applied plan does not apply it again.
func TestAnApprovalIsUsedOnce(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	countRepo(t, ns)
	tf, path := newCountTerraform(t, ns, "once", "one", manualApproval)
	approve(g, tf, waitPending(t, tf).PendingPlan())
	waitReady(t, tf)
	updateSpec(t, tf, func(obj *infrav1.Terraform) { obj.Spec.Vars = fileVars(path, "two") })
	applied := waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(obj.PendingPlan()).NotTo(BeEmpty())
		g.Expect(obj.Status.LastAppliedPlan).NotTo(Equal(obj.PendingPlan()))
	}).PendingPlan()
	approve(g, tf, applied)
	g.Eventually(func() string { return readFile(path) }).WithTimeout(waitTimeout).Should(Equal("one\ntwo\n"))
	waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(obj.Status.LastAppliedPlan).To(Equal(applied))
		g.Expect(conditions.IsReady(obj)).To(BeTrue())
	})

	// Restore the state the approved plan was applied to.
	versions, err := statehistory.List(context.Background(), k8sClient, get(g, tf))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(versions).NotTo(BeEmpty())
	leases := kubeClientset.CoordinationV1().Leases(ns)
	_, err = statehistory.Store{Client: k8sClient}.Restore(context.Background(), leases, get(g, tf), versions[0], "test")
	g.Expect(err).NotTo(HaveOccurred())
	annotate(t, tf, meta.ReconcileRequestAnnotation, "after-restore")

	obj := waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(readyReasonOf(obj)).To(Equal(infrav1.PlanPendingReason), describe(obj))
		g.Expect(obj.PendingPlan()).NotTo(BeEmpty())
	})
	g.Expect(obj.PendingPlan()).NotTo(Equal(applied), "the plan from the restored state has an id of its own")
	g.Expect(obj.Status.Plan.Replace).To(BeEquivalentTo(1), "the same changes as the applied plan")
	g.Consistently(func() string { return readFile(path) }).WithTimeout(3*time.Second).Should(Equal("one\ntwo\n"), "nothing applied again")
	g.Expect(strings.Count(readFile(path), "two")).To(Equal(1))
}
