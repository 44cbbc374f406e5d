package controllers

import (
	"fmt"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/testenv"
)

// commitStatusEvents are the events about name marked commit_status:
// update, "Type Reason revision", oldest first.
func commitStatusEvents(g Gomega, ns, name string) []string {
	var out []string
	for _, e := range eventsIn(g, ns) {
		if e.InvolvedObject.Name != name || e.Annotations[commitStatusAnnotation] != "update" {
			continue
		}
		for range max(e.Count, 1) {
			out = append(out, fmt.Sprintf("%s %s %s", e.Type, e.Reason, e.Annotations[revisionAnnotation]))
		}
	}
	return out
}

// Each reconcile that ends differently from the one before tells how, in
// the one event a commit status shows (commit_status: update): pending
// while a plan waits for approval, success once it is applied, failure
// when a plan fails (here: a variable the module refuses). A run under way, and a reconcile that changes
// nothing, tell nothing.
func TestCommitStatusEvents(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	tf, path := newFileTerraform(t, ns, "status", "one", manualApproval)
	obj := waitPending(t, tf)
	rev := obj.Status.Plan.Revision
	g.Eventually(func(g Gomega) []string { return commitStatusEvents(g, ns, tf.Name) }).WithTimeout(waitTimeout).WithPolling(pollEvery).
		Should(Equal([]string{"Normal " + meta.ProgressingReason + " " + rev}), "pending")

	approve(g, tf, obj.Status.Plan.Pending)
	waitReady(t, tf)
	g.Expect(readFile(path)).To(Equal("one"))
	g.Eventually(func(g Gomega) []string { return commitStatusEvents(g, ns, tf.Name) }).WithTimeout(waitTimeout).WithPolling(pollEvery).
		Should(Equal([]string{"Normal " + meta.ProgressingReason + " " + rev, "Normal " + infrav1.ReconciliationSucceededReason + " " + rev}), "success")

	updateSpec(t, tf, func(tf *infrav1.Terraform) {
		tf.Spec.Vars = []infrav1.Variable{{Name: "path", Value: testenv.JSONValue(path)}, {Name: "content", Value: testenv.JSONValue(map[string]any{"not": "a string"})}}
	})
	waitNotReady(t, tf, infrav1.InvalidConfigurationReason)
	g.Eventually(func(g Gomega) []string { return commitStatusEvents(g, ns, tf.Name) }).WithTimeout(waitTimeout).WithPolling(pollEvery).
		Should(HaveLen(3), "failure")
	last := commitStatusEvents(g, ns, tf.Name)[2]
	g.Expect(last).To(Equal(corev1.EventTypeWarning + " " + infrav1.InvalidConfigurationReason + " " + rev))
	g.Consistently(func(g Gomega) []string { return commitStatusEvents(g, ns, tf.Name) }).WithTimeout(3*pollEvery*10).WithPolling(pollEvery).
		Should(HaveLen(3), "the failure retried the same way tells nothing new")
}
