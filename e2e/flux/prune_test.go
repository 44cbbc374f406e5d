package flux

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/testenv"
)

// Removing a Terraform object's manifest from Git makes the Kustomization
// (prune: true) delete it; with deletionPolicy Delete Landform destroys its
// cloud objects and deletes its state and outputs, with Orphan the cloud
// objects and the state stay.
func TestPruneDestroysOrOrphans(t *testing.T) {
	s := newScenario(t, "prune")
	g := NewWithT(t)
	destroyed := appInfra(s.ns, "destroyed", "prune-delete", 10)
	orphaned := appInfra(s.ns, "orphaned", "prune-orphan", 10)
	orphaned.Spec.DeletionPolicy = infrav1.DeletionPolicyOrphan
	s.push("two Terraform objects", map[string]string{
		"infra/destroyed.yaml": manifest(destroyed),
		"infra/orphaned.yaml":  manifest(orphaned),
		// Keeps ./infra in Git once both are removed.
		"infra/configmap.yaml": manifest(configMap(s.ns, "infra")),
	})
	s.kustomization("infra", "./infra", map[string]any{"wait": true})
	s.eventually("both are Ready", func(g Gomega) {
		expectTerraformReady(g, s.terraform(g, destroyed.Name))
		expectTerraformReady(g, s.terraform(g, orphaned.Name))
	})
	for _, name := range []string{"prune-delete", "prune-orphan"} {
		g.Expect(database(g, name)).NotTo(BeNil(), "database %s", name)
		g.Expect(securityGroup(g, name+"-db")).NotTo(BeNil(), "security group %s-db", name)
	}
	orphanDB, orphanSG := database(g, "prune-orphan"), securityGroup(g, "prune-orphan-db")
	t.Cleanup(func() {
		ctx := context.Background()
		if err := cloudAPI.DeleteDatabase(ctx, orphanDB.ID); err != nil {
			t.Errorf("deleting the orphaned database: %v", err)
		}
		if err := cloudAPI.DeleteSecurityGroup(ctx, orphanSG.ID); err != nil {
			t.Errorf("deleting the orphaned security group: %v", err)
		}
	})
	stateOf := func(tf *infrav1.Terraform) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "tfstate-default-" + tf.Name}}
	}
	outputsOf := func(tf *infrav1.Terraform) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: tf.Spec.WriteOutputsToSecret.Name}}
	}
	for _, tf := range []*infrav1.Terraform{destroyed, orphaned} {
		g.Expect(s.gone(g, stateOf(tf))).To(BeFalse(), "state of %s", tf.Name)
		g.Expect(s.gone(g, outputsOf(tf))).To(BeFalse(), "outputs of %s", tf.Name)
	}

	removed := s.push("remove both Terraform objects", nil, "infra/destroyed.yaml", "infra/orphaned.yaml")
	s.eventually("Flux prunes both and Landform lets them go", func(g Gomega) {
		expectKustomizationReady(g, s.getKustomization(g, "infra"), removed)
		g.Expect(s.gone(g, &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: destroyed.Name}})).To(BeTrue(), "%s is still there", destroyed.Name)
		g.Expect(s.gone(g, &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: orphaned.Name}})).To(BeTrue(), "%s is still there", orphaned.Name)
	})

	// Delete: the cloud objects, the state and the outputs are gone.
	g.Expect(database(g, "prune-delete")).To(BeNil())
	g.Expect(securityGroup(g, "prune-delete-db")).To(BeNil())
	g.Expect(s.gone(g, stateOf(destroyed))).To(BeTrue(), "the state Secret of %s", destroyed.Name)
	g.Expect(s.gone(g, outputsOf(destroyed))).To(BeTrue(), "the outputs Secret of %s", destroyed.Name)

	// Orphan: the same cloud objects, and the state that knows them.
	db, sg := database(g, "prune-orphan"), securityGroup(g, "prune-orphan-db")
	g.Expect(db).NotTo(BeNil())
	g.Expect(sg).NotTo(BeNil())
	g.Expect(db.ID).To(Equal(orphanDB.ID))
	g.Expect(sg.ID).To(Equal(orphanSG.ID))
	g.Expect(stateIDs(g, s.secret(g, stateOf(orphaned).Name))).To(ConsistOf(
		"landform_database.this="+db.ID, "landform_security_group.db="+sg.ID))
}

// stateIDs reads the kubernetes backend's gzipped state and returns its
// resources as "address=id" (never printing the state: it holds the
// database's password).
func stateIDs(g Gomega, secret *corev1.Secret) []string {
	state, err := testenv.ReadState(secret.Data)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var ids []string
	for _, res := range state.Resources {
		for _, in := range res.Instances {
			ids = append(ids, res.Type+"."+res.Name+"="+in.Attributes.ID)
		}
	}
	return ids
}
