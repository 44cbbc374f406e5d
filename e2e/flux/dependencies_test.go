package flux

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/gitops"
	"github.com/landform-dev/landform/internal/testenv"
)

// A Terraform object that dependsOn a Flux Kustomization waits, with reason
// DependencyNotReady naming it, until that Kustomization is Ready; and one
// that dependsOn another Terraform object reads its outputs through
// varsFrom. Here "consumer" (modules/file) writes the security group id of
// "network" (modules/app-infra), read from network's outputs Secret, into a
// file, once Kustomization "platform" is Ready.
func TestDependsOnKustomizationAndTerraformOutputs(t *testing.T) {
	s := newScenario(t, "depends")
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "security-group-id")
	network := appInfra(s.ns, "network", "depends", 10)
	consumer := terraform(s.ns, "consumer", "./modules/file", variable("path", path))
	consumer.Spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{Name: "consumer-outputs", Outputs: []string{"path", "sha256"}}
	// Its content is network's output.
	consumer.Spec.VarsFrom = []infrav1.VarsReference{{Kind: "Secret", Name: "network-outputs", VarsKeys: []string{"security_group_id:content"}}}
	consumer.Spec.DependsOn = []infrav1.DependencyReference{
		{APIVersion: gitops.KustomizationGVK.GroupVersion().String(), Kind: gitops.KustomizationGVK.Kind, Name: "platform"},
		{Name: "network"},
	}
	s.push("network and its consumer", map[string]string{
		"infra/network.yaml":  manifest(network),
		"infra/consumer.yaml": manifest(consumer),
	})
	s.kustomization("infra", "./infra", nil)
	// ./platform is not in Git yet: this Kustomization fails until it is.
	s.kustomization("platform", "./platform", nil)

	s.eventually("network is Ready and consumer waits for Kustomization platform only", func(g Gomega) {
		expectTerraformReady(g, s.terraform(g, "network"))
		platform := gitops.Condition(s.getKustomization(g, "platform"), meta.ReadyCondition)
		g.Expect(platform).NotTo(BeNil())
		g.Expect(platform.Status).To(Equal(metav1.ConditionFalse))
		c := s.terraform(g, "consumer")
		g.Expect(conditions.IsFalse(c, meta.ReadyCondition)).To(BeTrue(), testenv.Describe(c))
		g.Expect(conditions.GetReason(c, meta.ReadyCondition)).To(Equal(infrav1.DependencyNotReadyReason))
		msg := conditions.GetMessage(c, meta.ReadyCondition)
		g.Expect(msg).To(ContainSubstring("Kustomization " + s.ns + "/platform"))
		g.Expect(msg).NotTo(ContainSubstring("network"), "network is Ready")
	})
	g.Expect(path).NotTo(BeAnExistingFile(), "consumer ran before its dependencies were Ready")
	g.Expect(s.gone(g, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "tfstate-default-consumer"}})).To(BeTrue(),
		"consumer has state before its dependencies were Ready")

	platform := s.push("platform", map[string]string{"platform/configmap.yaml": manifest(configMap(s.ns, "platform"))})
	s.eventually("platform is Ready and consumer applied", func(g Gomega) {
		expectKustomizationReady(g, s.getKustomization(g, "platform"), platform)
		expectTerraformReady(g, s.terraform(g, "consumer"))
	})
	sg := securityGroup(g, "depends-db")
	g.Expect(sg).NotTo(BeNil())
	g.Expect(string(s.secret(g, "network-outputs").Data["security_group_id"])).To(Equal(sg.ID))
	content, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(content)).To(Equal(sg.ID), "consumer wrote network's security group id")
	sum := sha256.Sum256([]byte(sg.ID))
	out := s.secret(g, "consumer-outputs")
	g.Expect(string(out.Data["sha256"])).To(Equal(hex.EncodeToString(sum[:])))
	g.Expect(string(out.Data["path"])).To(Equal(path))
}
