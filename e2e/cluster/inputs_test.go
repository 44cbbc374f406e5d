package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// pauseImage is the sandbox image up.sh imports: a container that runs
// until it is stopped.
const pauseImage = "localhost/pause:landform"

const dnsModule = `
variable "lb_hostname" { type = string }
variable "cluster_ip" { type = string }
resource "terraform_data" "record" { input = "${var.lb_hostname} -> ${var.cluster_ip}" }
output "record" { value = terraform_data.record.output }
`

// Inputs from a Kubernetes object's fields on the real cluster, as the
// chart installs Landform (its ClusterRole reads Services, not
// Deployments), with runner Pods: a Terraform object that needs the load
// balancer of a Deployment-backed Service waits with InputNotReady until
// the load-balancer status is written (by the test, as a load-balancer
// controller would), then applies with it and the cluster IP the API
// server assigned; one that reads a Deployment's field says
// InputForbidden, naming what to grant, and runs nothing.
func TestInputsFromAServiceOnARealCluster(t *testing.T) {
	e := connect(t)
	ctx := context.Background()
	e.gitRepository(t, "inputs", map[string]string{"m/main.tf": dnsModule})

	labels := map[string]string{"app": "inputs-web"}
	replicas := int32(1)
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "inputs-web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: pauseImage, ImagePullPolicy: corev1.PullNever,
				}}},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "inputs-web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: labels,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	e.deleteAndWait(t, deploy)
	e.deleteAndWait(t, svc)
	if err := e.client.Create(ctx, deploy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.deleteAndWait(t, deploy) })
	if err := e.client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.deleteAndWait(t, svc) })

	tf := e.terraform(t, inputsObject("inputs-dns", infrav1.VarsReference{APIVersion: "v1", Kind: "Service", Name: "inputs-web", Fields: []infrav1.FieldVariable{
		{Path: ".status.loadBalancer.ingress[0].hostname", Name: "lb_hostname"},
		{Path: ".spec.clusterIP", Name: "cluster_ip"},
	}}))
	cur := e.waitForTerraform(t, tf, "InputNotReady", func(tf *infrav1.Terraform) bool {
		c := ready(tf)
		return c != nil && c.Reason == infrav1.InputNotReadyReason
	})
	if want := "waiting for Service " + e.ns + "/inputs-web to set .status.loadBalancer.ingress[0].hostname (lb_hostname)"; ready(cur).Message != want {
		t.Errorf("message %q, want %q", ready(cur).Message, want)
	}
	if cur.Status.Run != nil || cur.Status.Plan != nil {
		t.Fatalf("an object waiting for its input ran: run %+v, plan %+v", cur.Status.Run, cur.Status.Plan)
	}

	if err := e.client.Get(ctx, keyOf(e.ns, svc.Name), svc); err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "inputs-web.elb.example.com"}}
	if err := e.client.Status().Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	e.waitForTerraform(t, tf, "Ready once the load balancer is there", readyTrue)
	var out corev1.Secret
	if err := e.client.Get(ctx, keyOf(e.ns, "inputs-dns-outputs"), &out); err != nil {
		t.Fatal(err)
	}
	if got, want := string(out.Data["record"]), "inputs-web.elb.example.com -> "+svc.Spec.ClusterIP; got != want || svc.Spec.ClusterIP == "" {
		t.Errorf("record %q, want %q", got, want)
	}

	forbidden := e.terraform(t, inputsObject("inputs-forbidden", infrav1.VarsReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "inputs-web",
		Fields: []infrav1.FieldVariable{{Path: ".status.readyReplicas", Name: "lb_hostname"}}}))
	cur = e.waitForTerraform(t, forbidden, "InputForbidden", func(tf *infrav1.Terraform) bool {
		c := ready(tf)
		return c != nil && c.Reason == infrav1.InputForbiddenReason
	})
	if msg := ready(cur).Message; !strings.Contains(msg, "may not get, list and watch Deployment in apps/v1") || !strings.Contains(msg, "inputKinds") {
		t.Errorf("the message %q does not say what to grant", msg)
	}
	if cur.Status.Run != nil {
		t.Errorf("an object whose input is forbidden ran: %+v", cur.Status.Run)
	}
}

// inputsObject is an auto-approved object on the inputs repository's
// module, reading its variables from in.
func inputsObject(name string, in infrav1.VarsReference) *infrav1.Terraform {
	return &infrav1.Terraform{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: infrav1.TerraformSpec{
			SourceRef:            infrav1.SourceReference{Kind: sourcev1.GitRepositoryKind, Name: "inputs"},
			Path:                 "./m",
			Interval:             metav1.Duration{Duration: time.Hour},
			RetryInterval:        &metav1.Duration{Duration: 5 * time.Second},
			ApprovePlan:          "auto",
			VarsFrom:             []infrav1.VarsReference{in},
			WriteOutputsToSecret: &infrav1.WriteOutputsToSecretSpec{Name: name + "-outputs"},
		},
	}
}
