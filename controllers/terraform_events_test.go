package controllers

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
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

// A failure retried the same way, by a new run each time, is one event:
// the run's id is in its metadata, not in its message, so that the
// Kubernetes Event counts the retries, and notification-controller's
// duplicate filter (object, message, revision) forwards it once per five
// minutes, as it does a Flux controller's retried failure.
func TestRetriedFailureIsOneEvent(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	// The file cannot be created under a file: every apply fails alike.
	notDir := filepath.Join(t.TempDir(), "file")
	g.Expect(os.WriteFile(notDir, nil, 0o600)).To(Succeed())
	tf, _ := newFileTerraform(t, ns, "retried", "x", func(tf *infrav1.Terraform) {
		tf.Spec.Vars = fileVars(filepath.Join(notDir, "x"), "x")
		tf.Spec.RetryInterval = &metav1.Duration{Duration: time.Second}
	})
	t.Cleanup(func() { deleteAndWait(t, tf) })

	runs := map[string]bool{}
	var failed []corev1.Event
	g.Eventually(func(g Gomega) {
		if run := get(g, tf).Status.Run; run != nil {
			runs[run.ID] = true
		}
		failed = slices.DeleteFunc(eventsIn(g, ns), func(e corev1.Event) bool {
			// Not the reconcile's end, told once: its message is Ready's.
			return e.InvolvedObject.Name != tf.Name || e.Reason != infrav1.ApplyFailedReason || !strings.HasPrefix(e.Message, "apply run failed: ")
		})
		g.Expect(failed).To(HaveLen(1), "one event for every failed apply")
		g.Expect(failed[0].Count).To(BeNumerically(">=", 3), "counting three failed applies")
	}).WithTimeout(waitTimeout).WithPolling(pollEvery).Should(Succeed(), func() string { return eventsOf(g, ns) })

	e := failed[0]
	g.Expect(e.Annotations).To(HaveKeyWithValue(runAnnotation, HavePrefix("run-")), "the run is named in the metadata")
	for id := range runs {
		g.Expect(e.Message).NotTo(ContainSubstring(id))
	}
	g.Expect(len(runs)).To(BeNumerically(">=", 2), "the retries were new runs")
}
