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
