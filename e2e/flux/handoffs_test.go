package flux

import (
	"context"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/cloud"
	"github.com/landform-dev/landform/internal/testenv"
)

// lbFirewall is a Terraform object on modules/lb-firewall that reads the
// address and hostname of Service service's load balancer, as
// docs/handoffs.md shows it.
func lbFirewall(ns, name, service string) *infrav1.Terraform {
	tf := terraform(ns, name, "./modules/lb-firewall", variable("name", name))
	tf.Spec.VarsFrom = []infrav1.VarsReference{{APIVersion: "v1", Kind: "Service", Name: service, Fields: []infrav1.FieldVariable{
		{Path: ".status.loadBalancer.ingress[0].ip", Name: "lb_ip"},
		{Path: ".status.loadBalancer.ingress[0].hostname", Name: "lb_hostname"},
	}}}
	tf.Spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{Name: name + "-outputs"}
	return tf
}

// Kubernetes hands Terraform a value it creates later: a load balancer's
// address, written into the Service's status by a load-balancer controller
// (here the test, as such a controller would). The Terraform object,
// applied by Flux with the Service, waits with InputNotReady naming the
// Service and path and runs nothing; once the status is written, the
// firewall rule for that address is created in the cloud, and when the
// load balancer moves, the same rule is updated in place.
func TestLoadBalancerAddressBecomesAFirewallRule(t *testing.T) {
	s := newScenario(t, "handoff-lb")
	g := NewWithT(t)
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "https", Port: 443}}},
	}
	tf := lbFirewall(s.ns, "web-firewall", "web")
	s.push("a Service and the firewall rule for its load balancer", map[string]string{
		"app/service.yaml":   manifest(svc),
		"app/terraform.yaml": manifest(tf),
	})
	s.kustomization("app", "./app", nil)

	s.eventually("the object waits for the load balancer's address", func(g Gomega) {
		cur := s.terraform(g, tf.Name)
		g.Expect(conditions.GetReason(cur, meta.ReadyCondition)).To(Equal(infrav1.InputNotReadyReason), testenv.Describe(cur))
		g.Expect(conditions.GetMessage(cur, meta.ReadyCondition)).To(Equal("waiting for Service " + s.ns +
			"/web to set .status.loadBalancer.ingress[0].ip (lb_ip); Service " + s.ns + "/web to set .status.loadBalancer.ingress[0].hostname (lb_hostname)"))
		g.Expect(cur.Status.Plan).To(BeNil(), "nothing planned before the address exists")
	})
	g.Expect(securityGroup(g, "web-firewall")).To(BeNil())

	setLoadBalancer(s, "web", "10.20.30.40", "web-1.elb.example.com")
	var sgID string
	s.eventually("the rule lets the load balancer in", func(g Gomega) {
		expectTerraformReady(g, s.terraform(g, tf.Name))
		sg := securityGroup(g, "web-firewall")
		g.Expect(sg).NotTo(BeNil())
		g.Expect(sg.Ingress).To(Equal([]cloud.IngressRule{{Protocol: "tcp", Port: 443, CIDR: "10.20.30.40/32"}}))
		g.Expect(sg.Description).To(Equal("HTTPS from web-1.elb.example.com"))
		g.Expect(string(s.secret(g, "web-firewall-outputs").Data["security_group_id"])).To(Equal(sg.ID))
		sgID = sg.ID
	})

	setLoadBalancer(s, "web", "10.20.30.41", "web-2.elb.example.com")
	s.eventually("the rule follows the load balancer", func(g Gomega) {
		cur := s.terraform(g, tf.Name)
		expectTerraformReady(g, cur)
		sg := securityGroup(g, "web-firewall")
		g.Expect(sg).NotTo(BeNil())
		g.Expect(sg.ID).To(Equal(sgID), "updated in place")
		g.Expect(sg.Ingress).To(Equal([]cloud.IngressRule{{Protocol: "tcp", Port: 443, CIDR: "10.20.30.41/32"}}))
		g.Expect(string(s.secret(g, "web-firewall-outputs").Data["lb_hostname"])).To(Equal("web-2.elb.example.com"))
		g.Expect(cur.Status.Inputs).To(HaveLen(2), "the values read are recorded for a destroy")
	})

	// Uninstalled together, as one Kustomization or HelmRelease does: the
	// Service is gone before the destroy runs, which uses the values last
	// read.
	s.push("uninstall", map[string]string{"app/configmap.yaml": manifest(configMap(s.ns, "placeholder"))}, "app/service.yaml", "app/terraform.yaml")
	s.eventually("the rule is destroyed with the object", func(g Gomega) {
		g.Expect(s.gone(g, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "web"}})).To(BeTrue())
		g.Expect(s.gone(g, &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: tf.Name}})).To(BeTrue())
		g.Expect(securityGroup(g, "web-firewall")).To(BeNil())
	})
}

// setLoadBalancer writes a Service's load-balancer status.
func setLoadBalancer(s *scenario, name, ip, hostname string) {
	s.t.Helper()
	s.eventually("the Service's status is written", func(g Gomega) {
		svc := &corev1.Service{}
		g.Expect(s.c.Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: name}, svc)).To(Succeed())
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip, Hostname: hostname}}
		g.Expect(s.c.Status().Update(context.Background(), svc)).To(Succeed())
	})
}

// databaseObject is a Terraform object on modules/database importing the
// existing database of that name (its id from id, or idFrom).
func databaseObject(ns, name, dbName string, im infrav1.Import) *infrav1.Terraform {
	tf := terraform(ns, name, "./modules/database", variable("name", dbName))
	im.To = "landform_database.this"
	tf.Spec.Imports = []infrav1.Import{im}
	tf.Spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{Name: name + "-outputs"}
	return tf
}

// createDatabase creates a database directly in the cloud, as someone did
// before Landform managed it.
func createDatabase(g Gomega, name string) *cloud.Database {
	engine, size := cloud.EnginePostgres, 10
	db, err := cloudAPI.CreateDatabase(context.Background(), cloud.DatabaseRequest{Name: &name, Engine: &engine, SizeGB: &size})
	g.Expect(err).NotTo(HaveOccurred())
	return db
}

// A database that exists already is imported, not created again: the plan
// says "1 to import" and creates nothing, the outputs Secret holds the
// existing id, and the database is the object's from then on. Deleted with
// Orphan, it stays in the cloud; adopted again (its id from a ConfigMap)
// and deleted with Delete, it is destroyed. An id the cloud does not know
// fails the plan with the engine's message.
func TestExistingDatabaseIsImported(t *testing.T) {
	s := newScenario(t, "handoff-import")
	g := NewWithT(t)
	db := createDatabase(g, "handoff-orders")

	kept := databaseObject(s.ns, "orders-db", "handoff-orders", infrav1.Import{ID: db.ID})
	kept.Spec.DeletionPolicy = infrav1.DeletionPolicyOrphan
	g.Expect(s.c.Create(s.ctx, kept)).To(Succeed())
	s.eventually("the database is imported", func(g Gomega) {
		cur := s.terraform(g, kept.Name)
		expectTerraformReady(g, cur)
		g.Expect(cur.Status.Plan).NotTo(BeNil())
		g.Expect(cur.Status.Plan.Import).To(Equal(int32(1)), testenv.Describe(cur))
		g.Expect(cur.Status.Plan.Add).To(BeZero(), "nothing created")
		g.Expect(cur.Status.Plan.ResourcesToImport).To(Equal([]string{"landform_database.this"}))
		g.Expect(string(s.secret(g, "orders-db-outputs").Data["id"])).To(Equal(db.ID))
	})
	// Applied at once (approvePlan auto): one event says the plan, its
	// counts and the outputs written.
	g.Expect(s.events(g, kept.Name, infrav1.AppliedReason)).To(ContainElement(ContainSubstring("+0 ~0 -0, 1 to import; wrote")))
	g.Expect(s.events(g, kept.Name, infrav1.PlannedWithChangesReason)).To(BeEmpty())
	expectOnlyDatabase(g, "handoff-orders", db.ID)

	g.Expect(s.c.Delete(s.ctx, kept)).To(Succeed())
	s.eventually("the object is gone", func(g Gomega) { g.Expect(s.gone(g, kept)).To(BeTrue()) })
	expectOnlyDatabase(g, "handoff-orders", db.ID)

	ids := configMap(s.ns, "database-ids")
	ids.Data = map[string]string{"orders": db.ID}
	g.Expect(s.c.Create(s.ctx, ids)).To(Succeed())
	adopted := databaseObject(s.ns, "orders-db-again", "handoff-orders", infrav1.Import{
		IDFrom: &infrav1.ImportIDReference{Kind: "ConfigMap", Name: "database-ids", Key: "orders"}})
	g.Expect(s.c.Create(s.ctx, adopted)).To(Succeed())
	s.eventually("the orphaned database is adopted again", func(g Gomega) {
		cur := s.terraform(g, adopted.Name)
		expectTerraformReady(g, cur)
		g.Expect(string(s.secret(g, "orders-db-again-outputs").Data["id"])).To(Equal(db.ID))
	})
	expectOnlyDatabase(g, "handoff-orders", db.ID)
	g.Expect(s.c.Delete(s.ctx, adopted)).To(Succeed())
	s.eventually("deleted with Delete, the database is destroyed", func(g Gomega) {
		g.Expect(s.gone(g, adopted)).To(BeTrue())
		g.Expect(database(g, "handoff-orders")).To(BeNil())
	})

	unknown := databaseObject(s.ns, "unknown-db", "handoff-unknown", infrav1.Import{ID: "db-0000000000"})
	g.Expect(s.c.Create(s.ctx, unknown)).To(Succeed())
	s.eventually("an unknown id fails the plan", func(g Gomega) {
		cur := s.terraform(g, unknown.Name)
		g.Expect(conditions.GetReason(cur, meta.ReadyCondition)).To(Equal(infrav1.PlanFailedReason), testenv.Describe(cur))
		g.Expect(conditions.GetMessage(cur, meta.ReadyCondition)).To(ContainSubstring("Cannot import non-existent remote object"))
	})
	g.Expect(database(g, "handoff-unknown")).To(BeNil(), "nothing created instead")
}

// expectOnlyDatabase checks the cloud holds exactly one database called
// name, the one of id: never created a second time.
func expectOnlyDatabase(g Gomega, name, id string) {
	dbs, err := cloudAPI.ListDatabases(context.Background())
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var ids []string
	for _, d := range dbs {
		if d.Name == name {
			ids = append(ids, d.ID)
		}
	}
	g.ExpectWithOffset(1, ids).To(Equal([]string{id}))
}
