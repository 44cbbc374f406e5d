package controllers

import (
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/outcome"
)

// The finished event (a commit status) is told once per ending; an object
// created again under a deleted one's name is told afresh, and an object
// a reconcile found gone is forgotten: the controller keeps nothing of it.
// A success goes to notification-controller alone (the notifier), a
// failure also as a Kubernetes event (the recorder).
func TestFinishedToldOncePerObject(t *testing.T) {
	g := NewWithT(t)
	rec, notifier := record.NewFakeRecorder(10), record.NewFakeRecorder(10)
	rep := &reporter{recorder: rec, notifier: notifier}
	obj := &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "uid-1"}}
	obj.Status.LastAttemptedRevision = "main@sha1:1111111111"
	conditions.MarkTrue(obj, meta.ReadyCondition, infrav1.ReconciliationSucceededReason, "applied")
	applied := outcome.Outcome{Kind: outcome.Succeeded}

	rep.finished(obj, applied)
	rep.finished(obj, applied)
	g.Expect(notifier.Events).To(HaveLen(1), "the same ending twice: told once")
	g.Expect(rec.Events).To(BeEmpty(), "a success: no Kubernetes event")

	again := obj.DeepCopy()
	again.UID = "uid-2"
	rep.finished(again, applied)
	g.Expect(notifier.Events).To(HaveLen(2), "an object created again under the name: told afresh")

	conditions.MarkFalse(again, meta.ReadyCondition, infrav1.ApplyFailedReason, "apply failed")
	rep.finished(again, outcome.Outcome{Kind: outcome.Retrying, Reason: infrav1.ApplyFailedReason})
	g.Expect(rec.Events).To(HaveLen(1), "a failure: a Kubernetes event too")
	g.Expect(<-rec.Events).To(HavePrefix("Warning " + infrav1.ApplyFailedReason))

	rep.forget(client.ObjectKeyFromObject(obj))
	_, held := rep.told.Load(client.ObjectKeyFromObject(obj))
	g.Expect(held).To(BeFalse(), "an object found gone is forgotten")

	quiet := &reporter{recorder: rec}
	quiet.finished(obj, applied)
	g.Expect(rec.Events).To(BeEmpty(), "without --events-addr a success tells nothing")
}
