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
func TestFinishedToldOncePerObject(t *testing.T) {
	g := NewWithT(t)
	rec := record.NewFakeRecorder(10)
	rep := &reporter{recorder: rec}
	obj := &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "uid-1"}}
	obj.Status.LastAttemptedRevision = "main@sha1:1111111111"
	conditions.MarkTrue(obj, meta.ReadyCondition, infrav1.ReconciliationSucceededReason, "applied")
	applied := outcome.Outcome{Kind: outcome.Succeeded}

	rep.finished(obj, applied)
	rep.finished(obj, applied)
	g.Expect(rec.Events).To(HaveLen(1), "the same ending twice: told once")

	again := obj.DeepCopy()
	again.UID = "uid-2"
	rep.finished(again, applied)
	g.Expect(rec.Events).To(HaveLen(2), "an object created again under the name: told afresh")

	rep.forget(client.ObjectKeyFromObject(obj))
	_, held := rep.told.Load(client.ObjectKeyFromObject(obj))
	g.Expect(held).To(BeFalse(), "an object found gone is forgotten")
}
