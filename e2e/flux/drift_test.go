package flux

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/cloud"
	"github.com/landform-dev/landform/internal/testenv"
)

// Changes made in the stand-in cloud behind Landform's back (a database
// resized, a security group deleted) are found by the drift check at the
// next interval and, with auto approval, repaired: the cloud is as the
// module says again, the Drifted condition says which plan repaired it, a
// DriftDetected event says what was found, and the outputs follow.
func TestCloudDriftIsRepaired(t *testing.T) {
	s := newScenario(t, "drift")
	g := NewWithT(t)
	ctx := context.Background()
	tf := appInfra(s.ns, "app-infra", "drift", 10)
	tf.Spec.Interval = metav1.Duration{Duration: 5 * time.Second}
	s.push("a Terraform object checked for drift every 5s", map[string]string{"infra/terraform.yaml": manifest(tf)})
	s.kustomization("infra", "./infra", map[string]any{"wait": true})

	var before *infrav1.Terraform
	s.eventually("it is applied", func(g Gomega) {
		before = s.terraform(g, tf.Name)
		expectTerraformReady(g, before)
		g.Expect(before.Status.LastAppliedPlan).NotTo(BeEmpty())
	})
	db, sg := database(g, "drift"), securityGroup(g, "drift-db")
	g.Expect(db).NotTo(BeNil())
	g.Expect(sg).NotTo(BeNil())

	// A database resized by hand: one in-place change.
	size := 50
	_, err := cloudAPI.UpdateDatabase(ctx, db.ID, cloud.DatabaseRequest{SizeGB: &size})
	g.Expect(err).NotTo(HaveOccurred())
	resized := s.expectRepaired(before.Status.LastAppliedPlan, "+0 ~1 -0", func(g Gomega) {
		cur := database(g, "drift")
		g.Expect(cur).NotTo(BeNil())
		g.Expect(cur.ID).To(Equal(db.ID), "updated in place")
		g.Expect(cur.SizeGB).To(Equal(10))
	})

	// A security group deleted by hand (the cloud detaches it from the
	// database): created again, and the database updated to use it.
	g.Expect(cloudAPI.DeleteSecurityGroup(ctx, sg.ID)).To(Succeed())
	var newSG string
	s.expectRepaired(resized, "+1 ~1 -0", func(g Gomega) {
		cur := securityGroup(g, "drift-db")
		g.Expect(cur).NotTo(BeNil())
		g.Expect(cur.ID).NotTo(Equal(sg.ID))
		d := database(g, "drift")
		g.Expect(d.SecurityGroupIDs).To(Equal([]string{cur.ID}))
		newSG = cur.ID
	})
	s.eventually("the outputs Secret has the new security group", func(g Gomega) {
		g.Expect(string(s.secret(g, "app-infra-outputs").Data["security_group_id"])).To(Equal(newSG))
	})
}

// expectRepaired waits until a drift plan other than previous has been
// applied, cloudRepaired holds, and the Drifted condition says that plan
// repaired the drift; the drift check found counts ("+0 ~1 -0"). It returns
// the repairing plan's id. It polls faster than the interval: the next
// drift check, 5s later, sets Drifted to NoDrift.
func (s *scenario) expectRepaired(previous, counts string, cloudRepaired func(g Gomega)) string {
	s.t.Helper()
	var plan string
	s.eventuallyEvery(250*time.Millisecond, "the drift is repaired", func(g Gomega) {
		cur := s.terraform(g, "app-infra")
		g.Expect(cur.Status.LastAppliedPlan).NotTo(Equal(previous), "no new plan applied yet")
		g.Expect(conditions.GetReason(cur, infrav1.DriftedCondition)).To(Equal(infrav1.AppliedReason), testenv.Describe(cur))
		g.Expect(conditions.IsFalse(cur, infrav1.DriftedCondition)).To(BeTrue())
		g.Expect(conditions.GetMessage(cur, infrav1.DriftedCondition)).To(Equal("drift repaired by plan " + cur.Status.LastAppliedPlan))
		expectTerraformReady(g, cur)
		cloudRepaired(g)
		plan = cur.Status.LastAppliedPlan
	})
	g := NewWithT(s.t)
	g.Expect(s.events(g, "app-infra", infrav1.DriftDetectedReason)).To(ContainElement(
		"drift detected by plan "+plan+": "+counts), "a DriftDetected event names the plan and what it changes")
	return plan
}
