package controllers

import (
	"fmt"
	"testing"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/testenv"
)

// commitStatusEvents are the events about name marked commit_status:
// update that notification-controller received, "severity Reason
// revision", oldest first.
func commitStatusEvents(ns, name string) []string {
	var out []string
	for _, e := range notified.about(ns, name) {
		if e.Metadata[commitStatusAnnotation] == "update" {
			out = append(out, fmt.Sprintf("%s %s %s", e.Severity, e.Reason, e.Metadata[revisionAnnotation]))
		}
	}
	return out
}

// kubernetesEvents are the Kubernetes events about name, "Type Reason",
// each as often as it was recorded, and how many of them are marked
// commit_status: update.
func kubernetesEvents(g Gomega, ns, name string) (all []string, commitStatus int) {
	for _, e := range eventsIn(g, ns) {
		if e.InvolvedObject.Name != name {
			continue
		}
		for range max(e.Count, 1) {
			all = append(all, e.Type+" "+e.Reason)
			if e.Annotations[commitStatusAnnotation] == "update" {
				commitStatus++
			}
		}
	}
	return all, commitStatus
}

// Each reconcile that ends differently from the one before tells how, in
// the one event a commit status shows (commit_status: update): pending
// while a plan waits for approval, success once it is applied, failure
// when a plan fails (here: a variable the module refuses). A run under way,
// and a reconcile that changes nothing, tell nothing. The success and the
// pending ending go to notification-controller alone: a person was told
// each by its own Kubernetes event (PlanPending, Applied); a failure's
// ending is a Kubernetes event too.
func TestCommitStatusEvents(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	tf, path := newFileTerraform(t, ns, "status", "one", manualApproval)
	obj := waitPending(t, tf)
	rev := obj.Status.Plan.Revision
	g.Eventually(func() []string { return commitStatusEvents(ns, tf.Name) }).WithTimeout(waitTimeout).WithPolling(pollEvery).
		Should(Equal([]string{eventv1.EventSeverityInfo + " " + meta.ProgressingReason + " " + rev}), "pending")

	approve(g, tf, obj.Status.Plan.Pending)
	waitReady(t, tf)
	g.Expect(readFile(path)).To(Equal("one"))
	g.Eventually(func() []string { return commitStatusEvents(ns, tf.Name) }).WithTimeout(waitTimeout).WithPolling(pollEvery).
		Should(Equal([]string{eventv1.EventSeverityInfo + " " + meta.ProgressingReason + " " + rev, eventv1.EventSeverityInfo + " " + infrav1.ReconciliationSucceededReason + " " + rev}), "success")
	g.Eventually(func(g Gomega) []string { all, _ := kubernetesEvents(g, ns, tf.Name); return all }).WithTimeout(waitTimeout).WithPolling(pollEvery).
		Should(ContainElements("Normal "+infrav1.PlanPendingReason, "Normal "+infrav1.AppliedReason), "each told a person")
	g.Consistently(func(g Gomega) int { _, n := kubernetesEvents(g, ns, tf.Name); return n }).WithTimeout(3*pollEvery*10).WithPolling(pollEvery).
		Should(BeZero(), "a success and a pending plan are no second Kubernetes event")

	updateSpec(t, tf, func(tf *infrav1.Terraform) {
		tf.Spec.Vars = []infrav1.Variable{{Name: "path", Value: testenv.JSONValue(path)}, {Name: "content", Value: testenv.JSONValue(map[string]any{"not": "a string"})}}
	})
	waitNotReady(t, tf, infrav1.InvalidConfigurationReason)
	g.Eventually(func() []string { return commitStatusEvents(ns, tf.Name) }).WithTimeout(waitTimeout).WithPolling(pollEvery).
		Should(HaveLen(3), "failure")
	last := commitStatusEvents(ns, tf.Name)[2]
	g.Expect(last).To(Equal(eventv1.EventSeverityError + " " + infrav1.InvalidConfigurationReason + " " + rev))
	g.Eventually(func(g Gomega) int { _, n := kubernetesEvents(g, ns, tf.Name); return n }).WithTimeout(waitTimeout).WithPolling(pollEvery).
		Should(Equal(1), "a failure's ending is a Kubernetes event too")
	g.Consistently(func() []string { return commitStatusEvents(ns, tf.Name) }).WithTimeout(3*pollEvery*10).WithPolling(pollEvery).
		Should(HaveLen(3), "the failure retried the same way tells nothing new")
}
