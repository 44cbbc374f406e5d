package flux

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/gitops"
	"github.com/landform-dev/landform/internal/testenv"
)

// healthTimeout is the Kustomization's timeout: the bound on its health
// checks, within which a failure must be reported.
const healthTimeout = 90 * time.Second

// A Kustomization with wait: true health-checks the Terraform object it
// applies (kstatus): it becomes Ready only once the Terraform object is,
// reports a Terraform object that fails (a pushed module that does not
// parse: Stalled, InvalidConfiguration) as a failed health check naming it
// within its timeout instead of waiting in progress, and recovers with the
// fix.
func TestKustomizationHealthFollowsTerraform(t *testing.T) {
	s := newScenario(t, "health")
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "health")
	tf := fileModule(s.ns, "file", path, "healthy")
	first := s.push("a Terraform object", map[string]string{"infra/terraform.yaml": manifest(tf)})
	s.kustomization("infra", "./infra", map[string]any{"wait": true, "timeout": healthTimeout.String()})

	// Read the Kustomization before the Terraform object: a Kustomization
	// Ready before the Terraform object would be caught.
	s.eventuallyEvery(200*time.Millisecond, "Kustomization infra is Ready", func(g Gomega) {
		ks := s.getKustomization(g, "infra")
		cur := s.terraform(g, tf.Name)
		if c := gitops.Condition(ks, meta.ReadyCondition); c != nil && c.Status == metav1.ConditionTrue {
			if !conditions.IsReady(cur) || cur.Status.ObservedGeneration != cur.Generation {
				StopTrying("Kustomization infra is Ready (" + c.Message + ") before Terraform " + tf.Name + ": " + testenv.Describe(cur)).Now()
			}
		}
		expectKustomizationReady(g, ks, first)
		g.Expect(gitops.Condition(ks, meta.HealthyCondition).Status).To(Equal(metav1.ConditionTrue))
	})
	content, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(content)).To(Equal("healthy"))

	// A module that does not parse, and the Terraform object moved to it.
	tf.Spec.Path = "./broken"
	broken := s.push("a module that does not parse", map[string]string{
		"broken/main.tf":       "resource \"landform_file\" \"this\" {\n  path = \n",
		"infra/terraform.yaml": manifest(tf),
	})
	pushed := time.Now()
	s.eventually("Kustomization infra reports the failed Terraform object", func(g Gomega) {
		ks := s.getKustomization(g, "infra")
		attempted, _, _ := unstructured.NestedString(ks.Object, "status", "lastAttemptedRevision")
		g.Expect(attempted).To(HaveSuffix(broken))
		ready := gitops.Condition(ks, meta.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse), testenv.Describe(ks))
		g.Expect(ready.Reason).To(Equal(meta.HealthCheckFailedReason))
		g.Expect(ready.Message).To(ContainSubstring("Terraform/" + s.ns + "/" + tf.Name))
	})
	took := time.Since(pushed)
	g.Expect(took).To(BeNumerically("<", healthTimeout), "the failure took %s to be reported", took)
	t.Logf("the failed health check was reported %s after the push: %s", took.Round(time.Second),
		gitops.ReadyMessage(s.getKustomization(g, "infra")))
	cur := s.terraform(g, tf.Name)
	g.Expect(conditions.IsStalled(cur)).To(BeTrue(), testenv.Describe(cur))
	g.Expect(conditions.GetReason(cur, meta.ReadyCondition)).To(Equal(infrav1.InvalidConfigurationReason))
	g.Expect(conditions.GetMessage(cur, meta.ReadyCondition)).To(ContainSubstring(broken[:10]), "the message names the revision")

	// The fix makes both Ready again.
	tf.Spec.Path = "./modules/file"
	tf.Spec.Vars = []infrav1.Variable{variable("path", path), variable("content", "fixed")}
	fixed := s.push("back to modules/file", map[string]string{"infra/terraform.yaml": manifest(tf)})
	s.eventually("Kustomization infra is Ready again", func(g Gomega) {
		expectKustomizationReady(g, s.getKustomization(g, "infra"), fixed)
		expectTerraformReady(g, s.terraform(g, tf.Name))
	})
	content, err = os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(content)).To(Equal("fixed"))
}
