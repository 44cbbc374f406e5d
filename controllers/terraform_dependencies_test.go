package controllers

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// B dependsOn A: B waits, naming A, and runs once A is Ready.
func TestDependsOnWaitsForReady(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	newGitRepository(t, ns, "repo", artifacts.publish(fileModule()))
	pathA, pathB := effectPath(t, ".a"), effectPath(t, ".b")
	b := newTerraform(t, ns, "b", func(tf *infrav1.Terraform) {
		tf.Spec.Vars = fileVars(pathB, "b")
		tf.Spec.DependsOn = []infrav1.DependencyReference{{Name: "a"}}
	})
	obj := waitNotReady(t, b, infrav1.DependencyNotReadyReason)
	g.Expect(conditions.GetMessage(obj, meta.ReadyCondition)).To(ContainSubstring("Terraform " + ns + "/a"))
	g.Consistently(func() string { return readFile(pathB) }).WithTimeout(2 * time.Second).Should(Equal("<missing>"))

	a := newTerraform(t, ns, "a", func(tf *infrav1.Terraform) {
		tf.Spec.Vars = fileVars(pathA, "a")
		tf.Spec.ApprovePlan = ""
	})
	obj = waitPending(t, a)
	g.Expect(readFile(pathB)).To(Equal("<missing>"), "B waits while A is not Ready")

	annotate(t, obj, infrav1.ApproveAnnotation, obj.Status.Plan.Pending)
	waitReady(t, a)
	waitReady(t, b)
	g.Expect(readFile(pathA)).To(Equal("a"))
	g.Expect(readFile(pathB)).To(Equal("b"))
}
