package controllers

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

const numberModule = `
variable "replicas" {
  type = number
}

resource "terraform_data" "this" {
  input = var.replicas
}

output "replicas" {
  value = terraform_data.this.output
}
`

// An object waiting on a varsFrom Secret that is missing, or Stalled on a
// value the module refuses, plans as soon as the Secret is created or
// fixed: the Secret's change brings it back, not the retry interval (an
// hour here).
func TestFixingAVarsFromSecretReplans(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	newGitRepository(t, ns, "repo", artifacts.publish(map[string]string{"modules/number/main.tf": numberModule}))
	tf := newTerraform(t, ns, "vars", func(tf *infrav1.Terraform) {
		tf.Spec.Path = "modules/number"
		tf.Spec.VarsFrom = []infrav1.VarsReference{{Kind: "Secret", Name: "vars"}}
		tf.Spec.RetryInterval = &metav1.Duration{Duration: time.Hour}
	})
	waitNotReady(t, tf, infrav1.VarsNotFoundReason)

	// Created, with a value the module's type refuses: Stalled.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vars"}, StringData: map[string]string{"replicas": "many"}}
	g.Expect(k8sClient.Create(ctx, secret)).To(Succeed())
	obj := waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(conditions.IsStalled(obj)).To(BeTrue(), describe(obj))
	})
	g.Expect(readyReasonOf(obj)).To(Equal(infrav1.InvalidConfigurationReason))

	// Fixed: planned and applied with the new value.
	g.Expect(k8sClient.Get(ctx, keyOf(ns, "vars"), secret)).To(Succeed())
	secret.Data = map[string][]byte{"replicas": []byte("3")}
	g.Expect(k8sClient.Update(ctx, secret)).To(Succeed())
	obj = waitReady(t, tf)
	g.Expect(obj.Status.AvailableOutputs).To(ContainElement("replicas"))
}
