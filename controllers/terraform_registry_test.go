package controllers

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/runlog"
	"github.com/landform-dev/landform/internal/testenv/moduleregistry"
)

// registryModule is what the private registry serves as
// <host>/acme/net/stub 1.0.0: one resource, and an output from it.
var registryModule = moduleregistry.Module{Namespace: "acme", Name: "net", System: "stub", Version: "1.0.0", Files: map[string]string{"main.tf": `
resource "terraform_data" "net" { input = "10.20.0.0/16" }
output "cidr" { value = terraform_data.net.output }
`}}

// A module from a private registry, the documented way
// (docs/runner-images.md): the token comes from a Secret as
// TF_TOKEN_<host> in spec.runnerPodTemplate.spec.env, and the registry's CA
// from a Secret volume named by SSL_CERT_FILE. Local runners ignore
// runnerPodTemplate, so the object runs in runner Pods, which a fake
// kubelet runs with the real runner and tofu. The registry sees the token
// on every protocol request, the object becomes Ready with the registry
// module's output, and the token is nowhere in status, events, run logs or
// the controller's and runners' logs. A stale token fails the plan with a
// message that says the registry refused it; the Secret rotated, the next
// retry succeeds.
func TestPrivateRegistryModuleWithTokenFromSecret(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const token, stale = "registry-token-Good-4711", "registry-token-Stale-0815"
	registry := moduleregistry.Start(t, token, registryModule)
	ns := newNamespace(t)
	kubelet := startKubelet(t, ns)

	for name, data := range map[string]map[string]string{
		"registry-ca":          {"ca.crt": string(registry.CACertPEM())},
		"registry-token":       {"token": token},
		"stale-registry-token": {"token": stale},
	} {
		g.Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: data})).To(Succeed())
	}
	newGitRepository(t, ns, "repo", artifacts.publish(map[string]string{"modules/root/main.tf": `
module "net" {
  source  = "` + moduleregistry.Host + `/acme/net/stub"
  version = "1.0.0"
}
output "cidr" { value = module.net.cidr }
`}))
	withRegistry := func(tokenSecret string) func(*infrav1.Terraform) {
		return func(tf *infrav1.Terraform) {
			tf.Labels = map[string]string{podPlacementLabel: "kubelet"}
			tf.Spec.Path = "modules/root"
			tf.Spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{Name: tf.Name + "-outputs"}
			tf.Spec.RunnerPodTemplate = &infrav1.RunnerPodTemplate{Spec: infrav1.RunnerPodSpec{
				Env: []corev1.EnvVar{
					{Name: moduleregistry.TokenEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: tokenSecret}, Key: "token",
					}}},
					{Name: "SSL_CERT_FILE", Value: "/etc/registry-ca/ca.crt"},
				},
				Volumes:      []corev1.Volume{{Name: "registry-ca", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "registry-ca"}}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "registry-ca", MountPath: "/etc/registry-ca", ReadOnly: true}},
			}}
		}
	}

	good := newTerraform(t, ns, "good", withRegistry("registry-token"))
	t.Cleanup(func() { deleteAndWait(t, good) })
	obj := waitReady(t, good)
	g.Expect(string(secretData(g, ns, "good-outputs")["cidr"])).To(Equal("10.20.0.0/16"), "the registry module's output")
	g.Expect(kubelet.CreatedIn(ns)).NotTo(BeEmpty(), "the runs ran in runner Pods")
	downloads := registry.Authorised(moduleregistry.Download)
	g.Expect(downloads).To(BeNumerically(">", 0), "the engine sent the token")
	g.Expect(registry.Authorised(moduleregistry.Package)).To(BeNumerically(">", 0))
	for _, kind := range []moduleregistry.Kind{moduleregistry.Discovery, moduleregistry.Versions, moduleregistry.Download, moduleregistry.Package} {
		g.Expect(registry.Refused(kind)).To(BeZero(), "%s requests refused", kind)
	}
	expectNowhere(g, obj, token)

	staleObj := newTerraform(t, ns, "stale", withRegistry("stale-registry-token"))
	t.Cleanup(func() { deleteAndWait(t, staleObj) })
	obj = waitNotReady(t, staleObj, infrav1.PlanFailedReason)
	g.Expect(readyMessageOf(obj)).To(And(ContainSubstring(moduleregistry.Host), ContainSubstring("401 Unauthorized")), "the message says the registry refused")
	g.Expect(readyMessageOf(obj)).NotTo(Or(ContainSubstring(token), ContainSubstring(stale)))
	g.Expect(registry.Refused(moduleregistry.Discovery)).To(BeNumerically(">", 0), "the registry refused the stale token")
	g.Expect(registry.Authorised(moduleregistry.Download)).To(Equal(downloads), "no download without the token")
	expectNowhere(g, obj, token, stale)

	// Rotating the token is a change to the Secret alone: the next
	// retry's Pod reads it.
	var s corev1.Secret
	g.Expect(k8sClient.Get(ctx, keyOf(ns, "stale-registry-token"), &s)).To(Succeed())
	s.Data = map[string][]byte{"token": []byte(token)}
	g.Expect(k8sClient.Update(ctx, &s)).To(Succeed())
	obj = waitReady(t, staleObj)
	g.Expect(string(secretData(g, ns, "stale-outputs")["cidr"])).To(Equal("10.20.0.0/16"))
	g.Expect(registry.Authorised(moduleregistry.Download)).To(BeNumerically(">", downloads))
	expectNowhere(g, obj, token, stale)
}

// expectNowhere checks that no value appears in obj's status, the events
// of its namespace, its kept run logs, or the controller's and runners'
// logs.
func expectNowhere(g Gomega, obj *infrav1.Terraform, values ...string) {
	ctx := context.Background()
	status, err := json.Marshal(obj.Status)
	g.Expect(err).NotTo(HaveOccurred())
	events := &corev1.EventList{}
	g.Expect(k8sClient.List(ctx, events, client.InNamespace(obj.Namespace))).To(Succeed())
	g.Expect(events.Items).NotTo(BeEmpty(), "the runs recorded events")
	logs, err := runlog.Read(ctx, k8sClient, obj.Namespace, obj.Name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(logs).To(HaveKey(runlog.PhasePlan), "the plan log was kept")
	for _, v := range values {
		g.Expect(string(status)).NotTo(ContainSubstring(v), "status")
		for _, e := range events.Items {
			g.Expect(e.Message).NotTo(ContainSubstring(v), "event %s", e.Reason)
			for _, a := range e.Annotations {
				g.Expect(a).NotTo(ContainSubstring(v), "event annotation")
			}
		}
		for phase, l := range logs {
			g.Expect(l.Text).NotTo(ContainSubstring(v), "kept %s log", phase)
		}
		g.Expect(controllerLogs.String()).NotTo(ContainSubstring(v), "controller logs")
		g.Expect(runnerLogs.String()).NotTo(ContainSubstring(v), "runner and kubelet logs")
	}
}
