package controllers

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/runner"
)

// A status write from a copy that lags behind the API server goes through
// when the object still records the same run (a progress note, a spec edit
// came between): a collected run's outcome is not lost to the conflict. A
// copy that no longer knows which run is recorded gets the conflict.
func TestStatusPatchRebasesOverTheSameRun(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	// Suspended: the controller only adds its finalizer.
	tf := newTerraform(t, ns, "patcher", func(tf *infrav1.Terraform) { tf.Spec.Suspend = true })
	waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(controllerutil.ContainsFinalizer(obj, infrav1.Finalizer)).To(BeTrue())
	})
	setRun := func(id, runnerID string) {
		obj := get(g, tf)
		p := newObjectPatcher(obj, k8sClient, k8sClient)
		obj.Status.Run = &infrav1.RunStatus{ID: id, Action: string(runner.Plan), Runner: runnerID}
		g.Expect(p.Patch(ctx, obj)).To(Succeed())
	}
	setRun("run-1", "")
	stale := get(g, tf)
	setRun("run-1", "local runner (pid 1)") // the progress note

	// The stale copy collects run-1.
	p := newObjectPatcher(stale, k8sClient, k8sClient)
	stale.Status.Run = nil
	stale.Status.LastAppliedRevision = "main@sha1:collected"
	g.Expect(p.Patch(ctx, stale)).To(Succeed())
	cur := get(g, tf)
	g.Expect(cur.Status.Run).To(BeNil())
	g.Expect(cur.Status.LastAppliedRevision).To(Equal("main@sha1:collected"))

	// A copy from before run-3 was recorded must not record run-2 over it.
	stale = get(g, tf)
	setRun("run-3", "")
	p = newObjectPatcher(stale, k8sClient, k8sClient)
	stale.Status.Run = &infrav1.RunStatus{ID: "run-2", Action: string(runner.Plan)}
	err := p.Patch(ctx, stale)
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "error %v", err)
	g.Expect(get(g, tf).Status.Run.ID).To(Equal("run-3"))
}
