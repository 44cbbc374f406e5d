package durable

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/testenv"
)

// upgradeFrom is the last commit before states had owners and kept
// versions names of their own (the code the reviews read).
const upgradeFrom = "ab69c93"

// This controller upgraded over objects an earlier one made: object db
// applied twice (a version kept under the old name tfstate-default-db-v1),
// and db-preview, planOnly on db's state through secretSuffix, which the
// earlier controller accepted. After the upgrade db keeps its state and
// nothing is created again; db-preview is refused (the state is db's, the
// oldest object on it); db's next apply moves the old version to
// tfhistory-db-1; deleting db-preview destroys nothing.
func TestUpgradeKeepsEveryState(t *testing.T) {
	suite.Require(t)
	oldController, oldRunner, err := testenv.BuildAt(upgradeFrom)
	if errors.Is(err, testenv.ErrNoRevision) {
		t.Skipf("upgrading needs commit %s, which this clone lacks (a shallow clone): %v", upgradeFrom, err)
	}
	g := NewWithT(t)
	g.Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()
	ns := suite.Namespace(t)
	suite.Publish(t, ns, map[string]string{"main.tf": slowModule})
	work := t.TempDir()
	old := suite.StartController(t, testenv.ControllerOptions{Name: "controller " + upgradeFrom, Binary: oldController, RunnerBinary: oldRunner,
		WorkDir: work, Args: []string{"--log-level=debug"}})

	effects := filepath.Join(t.TempDir(), "effects")
	db := newSlowTerraform(t, ns, "db", effects, 0)
	logOnFailure(t, db)
	g.Eventually(func(g Gomega) { settled(g, db, effects) }, 2*time.Minute, 250*time.Millisecond).Should(Succeed())
	setRev(g, db, "2")
	g.Eventually(func(g Gomega) {
		settled(g, db, effects)
		g.Expect(began(effects)).To(Equal(2))
	}, 2*time.Minute, 250*time.Millisecond).Should(Succeed())
	g.Expect(secretData(g, ns, "tfstate-default-db-v1")).NotTo(BeEmpty(), "the earlier controller kept a version under the old name")

	preview := slowTerraform(ns, "db-preview", filepath.Join(t.TempDir(), "preview-effects"), 0)
	preview.Spec.PlanOnly = true
	preview.Spec.BackendConfig = &infrav1.BackendConfig{SecretSuffix: "db"}
	g.Expect(suite.Env.Client.Create(ctx, preview)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, preview).Status.Plan).NotTo(BeNil(), "the earlier controller planned it on db's state")
	}, 2*time.Minute, 250*time.Millisecond).Should(Succeed())
	stateBefore := readState(g, db)
	g.Expect(old.Stop()).To(Succeed())

	startController(t, local, work)
	g.Eventually(func(g Gomega) {
		state := &corev1.Secret{}
		g.Expect(suite.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.StateSecret(db)}, state)).To(Succeed())
		g.Expect(state.Labels).To(HaveKeyWithValue(infrav1.OwnerUIDLabel, string(get(g, db).UID)), "db adopted its state")
		g.Expect(state.Finalizers).To(ContainElement(infrav1.StateFinalizer))
		obj := get(g, preview)
		g.Expect(conditions.GetReason(obj, meta.ReadyCondition)).To(Equal(infrav1.StateOwnedElsewhereReason))
		g.Expect(conditions.GetMessage(obj, meta.ReadyCondition)).To(ContainSubstring("is the state of Terraform " + ns + "/db"))
	}, 2*time.Minute, 250*time.Millisecond).Should(Succeed())
	after := readState(g, db)
	g.Expect(after.Lineage).To(Equal(stateBefore.Lineage), "the same state")
	g.Expect(after.Serial).To(BeNumerically(">=", stateBefore.Serial))
	g.Expect(began(effects)).To(Equal(2), "nothing created again")

	setRev(g, db, "3")
	g.Eventually(func(g Gomega) {
		settled(g, db, effects)
		g.Expect(began(effects)).To(Equal(3))
	}, 2*time.Minute, 250*time.Millisecond).Should(Succeed())
	var secrets corev1.SecretList
	g.Expect(suite.Env.Client.List(ctx, &secrets, client.InNamespace(ns))).To(Succeed())
	var found []string
	for _, s := range secrets.Items {
		found = append(found, s.Name)
	}
	g.Expect(found).To(ContainElements("tfhistory-db-1", "tfhistory-db-2"), "the old version moved, the new one kept beside it")
	g.Expect(slices.Contains(found, "tfstate-default-db-v1")).To(BeFalse(), "its old name is free")

	g.Expect(suite.Env.Client.Delete(ctx, preview)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(suite.Env.Client.Get(ctx, client.ObjectKeyFromObject(preview), &infrav1.Terraform{}))
	}, time.Minute, 250*time.Millisecond).Should(BeTrue())
	g.Expect(readState(g, db).Resources).NotTo(BeEmpty(), "deleting db-preview left db's state")
	g.Eventually(func(g Gomega) { settled(g, db, effects) }, time.Minute, 250*time.Millisecond).Should(Succeed())
	g.Expect(began(effects)).To(Equal(3))
}

// setRev changes the slow module's var.rev: a new create.
func setRev(g Gomega, tf *infrav1.Terraform, rev string) {
	obj := get(g, tf)
	patch := client.MergeFrom(obj.DeepCopy())
	vars := obj.Spec.Vars[:0]
	for _, v := range obj.Spec.Vars {
		if v.Name != "rev" {
			vars = append(vars, v)
		}
	}
	obj.Spec.Vars = append(vars, infrav1.Variable{Name: "rev", Value: testenv.JSONValue(rev)})
	g.Expect(suite.Env.Client.Patch(context.Background(), obj, patch)).To(Succeed())
}
