package controllers

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/inputs"
	"github.com/landform-dev/landform/internal/outcome"
	"github.com/landform-dev/landform/internal/testenv"
)

const hostnameModule = `
variable "lb_hostname" {
  type = string
}

variable "lb_ports" {
  type    = list(number)
  default = []
}

resource "terraform_data" "record" {
  input = var.lb_hostname
}

output "record" {
  value = terraform_data.record.output
}

output "ports" {
  value = var.lb_ports
}
`

// lbInput reads a Service's load-balancer hostname into lb_hostname, and
// its ports into lb_ports.
func lbInput(service string) infrav1.VarsReference {
	return infrav1.VarsReference{APIVersion: "v1", Kind: "Service", Name: service, Fields: []infrav1.FieldVariable{
		{Path: ".status.loadBalancer.ingress[0].hostname", Name: "lb_hostname"},
		{Path: "{.spec.ports[*].port}", Name: "lb_ports"},
	}}
}

// newLoadBalancer creates a Service of type LoadBalancer, without the
// status a load-balancer controller writes later.
func newLoadBalancer(t *testing.T, ns, name string) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80}, {Name: "https", Port: 443},
		}},
	}
	NewWithT(t).Expect(k8sClient.Create(context.Background(), svc)).To(Succeed())
	return svc
}

// setHostname writes the Service's status as a load-balancer controller
// would.
func setHostname(t *testing.T, svc *corev1.Service, hostname string) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(svc), svc)).To(Succeed())
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: hostname}}
	g.Expect(k8sClient.Status().Update(context.Background(), svc)).To(Succeed())
}

// A module that needs a load balancer's hostname waits, with reason
// InputNotReady naming the Service and the path, until a controller writes
// it; it plans and applies as soon as it does (the watch on Services wakes
// it: the interval and retry interval are an hour), and plans again when
// the hostname changes.
func TestInputFromAServiceStatus(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	newGitRepository(t, ns, "repo", artifacts.publish(map[string]string{"modules/dns/main.tf": hostnameModule}))
	svc := newLoadBalancer(t, ns, "web")
	tf := newTerraform(t, ns, "dns", func(tf *infrav1.Terraform) {
		tf.Spec.Path = "modules/dns"
		tf.Spec.VarsFrom = []infrav1.VarsReference{lbInput("web")}
		tf.Spec.RetryInterval = &metav1.Duration{Duration: time.Hour}
		tf.Spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{Name: "dns-outputs"}
	})

	obj := waitNotReady(t, tf, infrav1.InputNotReadyReason)
	g.Expect(readyMessageOf(obj)).To(Equal(
		"waiting for Service " + ns + "/web to set .status.loadBalancer.ingress[0].hostname (lb_hostname)"))
	g.Expect(conditions.IsStalled(obj)).To(BeFalse(), "waiting is not a failure")
	g.Expect(obj.Status.Plan).To(BeNil(), "nothing planned without the input")

	setHostname(t, svc, "a1b2.elb.example.com")
	waitReady(t, tf)
	g.Eventually(func(g Gomega) {
		data := secretData(g, ns, "dns-outputs")
		g.Expect(string(data["record"])).To(Equal("a1b2.elb.example.com"))
		g.Expect(string(data["ports"])).To(Equal("[80,443]"), "a path selecting several values passes a list")
	}).WithTimeout(waitTimeout).WithPolling(pollEvery).Should(Succeed())
	first := get(g, tf).Status.LastAppliedPlan

	setHostname(t, svc, "c3d4.elb.example.com")
	obj = waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(obj.Status.LastAppliedPlan).NotTo(Equal(first))
		g.Expect(conditions.IsReady(obj)).To(BeTrue())
	})
	g.Expect(obj.Status.Plan.Change).To(Equal(int32(1)), describe(obj))
	g.Eventually(func(g Gomega) {
		g.Expect(string(secretData(g, ns, "dns-outputs")["record"])).To(Equal("c3d4.elb.example.com"))
	}).WithTimeout(waitTimeout).WithPolling(pollEvery).Should(Succeed())
}

// Bad input references each say what is wrong: a missing object waits
// with InputNotFound (and plans once it is created, woken by the watch), a
// path that does not parse stalls with InvalidInputPath, an optional
// reference whose field is not set leaves the module's default, and a
// namespace the controller does not allow is refused.
func TestInputReferenceErrors(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	newGitRepository(t, ns, "repo", artifacts.publish(map[string]string{"modules/dns/main.tf": hostnameModule}))
	slow := func(tf *infrav1.Terraform) {
		tf.Spec.Path = "modules/dns"
		tf.Spec.RetryInterval = &metav1.Duration{Duration: time.Hour}
	}

	missing := newTerraform(t, ns, "missing", func(tf *infrav1.Terraform) {
		slow(tf)
		tf.Spec.VarsFrom = []infrav1.VarsReference{lbInput("later")}
	})
	obj := waitNotReady(t, missing, infrav1.InputNotFoundReason)
	g.Expect(readyMessageOf(obj)).To(ContainSubstring("input Service " + ns + "/later not found"))

	badPath := newTerraform(t, ns, "bad-path", func(tf *infrav1.Terraform) {
		slow(tf)
		tf.Spec.VarsFrom = []infrav1.VarsReference{{APIVersion: "v1", Kind: "Service", Name: "later",
			Fields: []infrav1.FieldVariable{{Path: ".status.loadBalancer.ingress[0", Name: "lb_hostname"}}}}
	})

	optional := newTerraform(t, ns, "optional", func(tf *infrav1.Terraform) {
		slow(tf)
		in := lbInput("later")
		in.Optional = true
		tf.Spec.VarsFrom = []infrav1.VarsReference{in}
		tf.Spec.Vars = []infrav1.Variable{{Name: "lb_hostname", Value: testenv.JSONValue("fallback.example.com")}}
		tf.Spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{Name: "optional-outputs"}
	})
	waitReady(t, optional)
	g.Expect(string(secretData(g, ns, "optional-outputs")["ports"])).To(Equal("[]"), "the module's default")

	svc := newLoadBalancer(t, ns, "later")
	setHostname(t, svc, "later.elb.example.com")
	waitReady(t, missing)

	obj = waitFor(t, badPath, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(conditions.IsStalled(obj)).To(BeTrue())
	})
	g.Expect(readyReasonOf(obj)).To(Equal(infrav1.InvalidInputPathReason))
	g.Expect(readyMessageOf(obj)).To(ContainSubstring(`path ".status.loadBalancer.ingress[0" of lb_hostname`))

	other := newTerraform(t, ns, "other-ns", func(tf *infrav1.Terraform) {
		slow(tf)
		in := lbInput("web")
		in.Namespace = "kube-system"
		tf.Spec.VarsFrom = []infrav1.VarsReference{in}
	})
	obj = waitNotReady(t, other, infrav1.CrossNamespaceRefDeniedReason)
	g.Expect(readyMessageOf(obj)).To(ContainSubstring("varsFrom Service kube-system/web"))
	g.Expect(k8sClient.Get(ctx, keyOf(ns, "later"), svc)).To(Succeed())
}

// A kind the controller may not read is a condition that says what to
// grant, not a crash or a hang: read here with the identity of a
// ServiceAccount that has no RBAC at all.
func TestInputOfAForbiddenKind(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nobody"}}
	g.Expect(k8sClient.Create(ctx, sa)).To(Succeed())
	tok, err := kubeClientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "nobody", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	cfg := rest.AnonymousClientConfig(restCfg)
	cfg.BearerToken = tok.Status.Token
	nobody, err := client.New(cfg, client.Options{Scheme: k8sClient.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())

	r := &inputs.Resolver{Reader: nobody, Mapper: k8sClient.RESTMapper(), Watches: inputs.NewWatches(nil, nil, nobody, nil)}
	tf := &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dns"}}
	tf.Spec.VarsFrom = []infrav1.VarsReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web",
		Fields: []infrav1.FieldVariable{{Path: ".status.readyReplicas", Name: "replicas"}}}}
	_, err = r.Vars(ctx, tf, inputs.Plan)
	o := outcome.Of(err, "")
	g.Expect(o.Reason).To(Equal(infrav1.InputForbiddenReason))
	g.Expect(o.Kind).To(Equal(outcome.Waiting))
	g.Expect(err.Error()).To(Equal("input Deployment " + ns + "/web: the controller may not get, list and watch Deployment in apps/v1: grant it (the chart's inputKinds value)"))
}
