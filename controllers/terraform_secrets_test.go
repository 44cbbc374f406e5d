package controllers

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/planstore"
	"github.com/landform-dev/landform/internal/runlog"
)

// Sensitive outputs and variables from Secrets exist only in Secrets: never in
// status, events, or the controller's and runners' logs.
func TestSecretsNeverLeak(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	const secretVar = "hunter2-Very-Secret-Var"
	g.Expect(k8sClient.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
		StringData: map[string]string{"password": secretVar},
	})).To(Succeed())
	tf, path := newFileTerraform(t, ns, "secret", "public", func(tf *infrav1.Terraform) {
		tf.Spec.VarsFrom = []infrav1.VarsReference{{Kind: "Secret", Name: "creds", VarsKeys: []string{"password:sensitive_content"}}}
		tf.Spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{Name: "secret-outputs", Outputs: []string{"secret:password", "path"}}
	})
	obj := waitReady(t, tf)

	// The value did its job: in the external object and the outputs Secret.
	g.Expect(readFile(path)).To(Equal("public" + secretVar))
	g.Expect(string(secretData(g, ns, "secret-outputs")["password"])).To(Equal(secretVar))
	g.Expect(obj.Status.AvailableOutputs).To(ContainElement("secret"), "names only")

	// And nowhere else.
	status, err := json.Marshal(obj.Status)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(status)).NotTo(ContainSubstring(secretVar), "status")

	events := &corev1.EventList{}
	g.Expect(k8sClient.List(context.Background(), events, client.InNamespace(ns))).To(Succeed())
	g.Expect(events.Items).NotTo(BeEmpty(), "the run recorded events")
	for _, e := range events.Items {
		g.Expect(e.Message).NotTo(ContainSubstring(secretVar), "event %s", e.Reason)
		for _, v := range e.Annotations {
			g.Expect(v).NotTo(ContainSubstring(secretVar), "event annotation")
		}
	}

	logs, err := runlog.Read(context.Background(), k8sClient, ns, obj.Name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(logs).To(HaveKey(runlog.PhaseApply))
	for phase, l := range logs {
		g.Expect(l.Text).NotTo(ContainSubstring(secretVar), "kept %s log", phase)
	}

	g.Expect(controllerLogs.String()).To(ContainSubstring(obj.Name), "the controller's logs were captured")
	g.Expect(controllerLogs.String()).NotTo(ContainSubstring(secretVar), "controller logs")
	g.Expect(runnerLogs.String()).NotTo(BeEmpty(), "the runners' logs were captured")
	g.Expect(runnerLogs.String()).NotTo(ContainSubstring(secretVar), "runner logs")
	g.Expect(strings.Contains(controllerLogs.String(), "hunter2")).To(BeFalse())
}

// A Secret key holding a JSON object for a map(string) variable, and a
// multi-line Secret value: terraform prints their parts one by one, and no
// part appears anywhere outside Secrets — status, events, kept logs, the
// stored human plan `landform plan show` prints, the controller's and the
// runners' logs, the metrics — and neither does a value terraform marks
// sensitive.
func TestStructuredSecretsNeverLeak(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	parts := []string{"hunter2-Map-Password", "tok-Nested-0123", "BEGIN-line-one-xyz", "second-line-of-the-key", "gen-Sensitive-777"}
	g.Expect(k8sClient.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
		StringData: map[string]string{
			"creds": `{"user": "app", "password": "` + parts[0] + `", "token": "` + parts[1] + `"}`,
			"pem":   parts[2] + "\n" + parts[3] + "\n",
		},
	})).To(Succeed())
	newGitRepository(t, ns, "repo", artifacts.publish(map[string]string{"modules/structured/main.tf": `
variable "creds" { type = map(string) }
variable "pem" { type = string }
resource "terraform_data" "this" {
  input = { user = var.creds["user"], password = var.creds["password"], token = var.creds["token"], pem = var.pem }
}
output "generated" {
  value     = "gen-Sensitive-${length(var.pem) * 0 + 777}"
  sensitive = true
}
`}))
	tf := newTerraform(t, ns, "structured", func(tf *infrav1.Terraform) {
		tf.Spec.Path = "modules/structured"
		tf.Spec.VarsFrom = []infrav1.VarsReference{{Kind: "Secret", Name: "creds"}}
	})
	obj := waitReady(t, tf)

	status, err := json.Marshal(obj.Status)
	g.Expect(err).NotTo(HaveOccurred())
	events := &corev1.EventList{}
	g.Expect(k8sClient.List(context.Background(), events, client.InNamespace(ns))).To(Succeed())
	logs, err := runlog.Read(context.Background(), k8sClient, ns, obj.Name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(logs[runlog.PhasePlan].Text).To(ContainSubstring("terraform_data.this"), "the plan log was kept")
	plan, err := planstore.Store{Client: k8sClient}.Load(context.Background(), obj)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(plan.HumanPlan)).To(ContainSubstring("password"), "the human plan was kept")
	shown, errOut, err := runCLI(ns, "plan", "show", obj.Name)
	g.Expect(err).NotTo(HaveOccurred(), errOut)
	g.Expect(shown).To(ContainSubstring("terraform_data.this"), "plan show printed the plan")
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	var scraped bytes.Buffer
	for _, f := range families {
		_, err := expfmt.MetricFamilyToText(&scraped, f)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(scraped.String()).To(ContainSubstring("landform_runs_total"), "Landform's metrics were gathered")
	for _, part := range parts {
		g.Expect(shown).NotTo(ContainSubstring(part), "landform plan show")
		g.Expect(errOut).NotTo(ContainSubstring(part), "landform plan show (stderr)")
		g.Expect(scraped.String()).NotTo(ContainSubstring(part), "metrics")
		g.Expect(string(status)).NotTo(ContainSubstring(part), "status")
		for _, e := range events.Items {
			g.Expect(e.Message).NotTo(ContainSubstring(part), "event %s", e.Reason)
		}
		for phase, l := range logs {
			g.Expect(l.Text).NotTo(ContainSubstring(part), "kept %s log", phase)
		}
		g.Expect(string(plan.HumanPlan)).NotTo(ContainSubstring(part), "the human plan")
		g.Expect(controllerLogs.String()).NotTo(ContainSubstring(part), "controller logs (debug)")
		g.Expect(runnerLogs.String()).NotTo(ContainSubstring(part), "runner logs")
	}
}
