package controllers

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/statehistory"
)

// Before every apply the state as it was is kept: three applies, two
// versions (the state before the first apply held nothing), each the state
// the next apply started from (serials grow), the newest the state of the
// second apply; deleting the object with Delete removes them with the
// state.
func TestStateIsKeptBeforeEveryApply(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	tf, path := newFileTerraform(t, ns, "kept", "one", nil)
	waitReady(t, tf)
	for _, content := range []string{"two", "three"} {
		updateSpec(t, tf, func(obj *infrav1.Terraform) { obj.Spec.Vars = fileVars(path, content) })
		g.Eventually(func() string { return readFile(path) }).WithTimeout(waitTimeout).Should(Equal(content))
		waitReady(t, tf)
	}

	versions, err := statehistory.List(context.Background(), k8sClient, get(g, tf))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(versions).To(HaveLen(2), "one version before each apply but the first")
	for i, v := range versions {
		g.Expect(v.Why).To(HavePrefix("apply of plan "))
		if i > 0 {
			g.Expect(v.Serial).To(BeNumerically("<", versions[i-1].Serial), "older versions have smaller serials")
			g.Expect(v.Lineage).To(Equal(versions[0].Lineage), "one lineage")
		}
	}

	g.Expect(k8sClient.Delete(context.Background(), tf)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(context.Background(), keyOf(ns, tf.Name), &infrav1.Terraform{}))
	}).WithTimeout(waitTimeout).Should(BeTrue(), "deleted")
	versions, err = statehistory.List(context.Background(), k8sClient, tf)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(versions).To(BeEmpty(), "deletionPolicy Delete removes the versions with the state")
}
