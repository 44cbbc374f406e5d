package flux

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// A commit pushed to Git travels the whole way without anyone touching the
// cluster: source-controller fetches it, the infra Kustomization applies
// the changed Terraform object and health-checks it, Landform plans and
// applies (auto approval) the new revision, writes the outputs Secret, and
// only then does the app Kustomization (dependsOn infra) render the app
// with the new outputs.
func TestCommitFlowsToCloudSecretAndApp(t *testing.T) {
	s := newScenario(t, "commit")
	g := NewWithT(t)
	tf := appInfra(s.ns, "app-infra", "commit", 10)
	first := s.push("infrastructure and app", map[string]string{
		"infra/terraform.yaml": manifest(tf),
		"app/deployment.yaml":  manifest(appDeployment(s.ns, "app-infra-outputs")),
	})
	s.kustomization("infra", "./infra", map[string]any{
		"healthChecks": []any{map[string]any{
			"apiVersion": infrav1.GroupVersion.String(), "kind": infrav1.TerraformKind, "name": tf.Name, "namespace": s.ns,
		}},
	})
	s.kustomization("app", "./app", map[string]any{
		"dependsOn": []any{map[string]any{"name": "infra"}},
		"postBuild": map[string]any{"substituteFrom": []any{map[string]any{"kind": "Secret", "name": "app-infra-outputs"}}},
	})

	var applied *infrav1.Terraform
	s.eventually("the first commit is applied", func(g Gomega) {
		applied = s.terraform(g, tf.Name)
		expectTerraformReady(g, applied)
		g.Expect(applied.Status.LastAppliedRevision).To(HaveSuffix(first))
	})
	var sgID, dbID string
	s.eventually("the cloud holds the database (10 GB) and its security group", func(g Gomega) {
		sg, db := securityGroup(g, "commit-db"), database(g, "commit")
		g.Expect(sg).NotTo(BeNil())
		g.Expect(db).NotTo(BeNil())
		g.Expect(db.SizeGB).To(Equal(10))
		g.Expect(db.SecurityGroupIDs).To(Equal([]string{sg.ID}))
		sgID, dbID = sg.ID, db.ID
	})
	s.expectOutputs(g, sgID, "10")
	s.expectApp(first, sgID, "10GB")

	tf.Spec.Vars = []infrav1.Variable{variable("name", "commit"), variable("db_size_gb", 20)}
	second := s.push("grow the database to 20 GB", map[string]string{"infra/terraform.yaml": manifest(tf)})
	s.eventually("the second commit is planned and applied", func(g Gomega) {
		cur := s.terraform(g, tf.Name)
		expectTerraformReady(g, cur)
		g.Expect(cur.Status.LastAppliedRevision).To(HaveSuffix(second))
		g.Expect(cur.Status.LastAppliedPlan).NotTo(Equal(applied.Status.LastAppliedPlan))
		g.Expect(cur.Status.Plan).NotTo(BeNil())
		g.Expect(cur.Status.Plan.Revision).To(HaveSuffix(second))
		g.Expect([]int32{cur.Status.Plan.Add, cur.Status.Plan.Change, cur.Status.Plan.Destroy}).To(Equal([]int32{0, 1, 0}), "one in-place change")
		g.Expect(cur.Status.Plan.Resources).To(ConsistOf("landform_database.this"))
	})
	db := database(g, "commit")
	g.Expect(db).NotTo(BeNil())
	g.Expect(db.ID).To(Equal(dbID), "resized in place, not replaced")
	g.Expect(db.SizeGB).To(Equal(20))
	s.expectOutputs(g, sgID, "20")
	s.expectApp(second, sgID, "20GB")
}

// expectOutputs checks Secret app-infra-outputs against the cloud.
func (s *scenario) expectOutputs(g Gomega, sgID, sizeGB string) {
	s.t.Helper()
	sec := s.secret(g, "app-infra-outputs")
	g.Expect(string(sec.Data["security_group_id"])).To(Equal(sgID))
	g.Expect(string(sec.Data["db_size_gb"])).To(Equal(sizeGB))
	g.Expect(string(sec.Data["db_port"])).To(Equal("5432"))
	endpoint := string(sec.Data["db_endpoint"])
	g.Expect(endpoint).NotTo(BeEmpty())
	dsn := string(sec.Data["dsn"])
	// Never print the DSN: it holds the password.
	g.Expect(strings.HasPrefix(dsn, "postgres://") && strings.Contains(dsn, "@"+endpoint+":5432/commit")).To(BeTrue(),
		"dsn (%d bytes, not shown) is not postgres://…@%s:5432/commit", len(dsn), endpoint)
}

// expectApp waits until the app Kustomization has applied commit with
// the outputs substituted into the Deployment.
func (s *scenario) expectApp(commit, sgID, size string) {
	s.t.Helper()
	s.eventually("the app Kustomization applies "+commit+" with the outputs", func(g Gomega) {
		expectKustomizationReady(g, s.getKustomization(g, "infra"), commit)
		expectKustomizationReady(g, s.getKustomization(g, "app"), commit)
		d := &appsv1.Deployment{}
		g.Expect(s.c.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: "app"}, d)).To(Succeed())
		g.Expect(d.Annotations).To(HaveKeyWithValue("landform.dev/security-group", sgID))
		g.Expect(d.Annotations).To(HaveKeyWithValue("landform.dev/db-size", size))
		env := d.Spec.Template.Spec.Containers[0].Env
		g.Expect(env).To(HaveLen(1))
		g.Expect(env[0].ValueFrom.SecretKeyRef.Name).To(Equal("app-infra-outputs"))
		g.Expect(env[0].ValueFrom.SecretKeyRef.Key).To(Equal("dsn"))
	})
}
