package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// The API server itself rejects invalid objects (markers, enums, patterns,
// CEL), with a message naming the field.
func TestAPIValidation(t *testing.T) {
	ns := newNamespace(t)
	cases := map[string]struct {
		mutate func(*infrav1.Terraform)
		field  string
	}{
		"approvePlan neither auto nor a plan id": {func(tf *infrav1.Terraform) { tf.Spec.ApprovePlan = "yes" }, "spec.approvePlan"},
		"unknown deletionPolicy":                 {func(tf *infrav1.Terraform) { tf.Spec.DeletionPolicy = "Keep" }, "spec.deletionPolicy"},
		"unknown source kind":                    {func(tf *infrav1.Terraform) { tf.Spec.SourceRef.Kind = "HelmRepository" }, "spec.sourceRef.kind"},
		"varsFrom object without fields": {func(tf *infrav1.Terraform) {
			tf.Spec.VarsFrom = []infrav1.VarsReference{{APIVersion: "v1", Kind: "Pod", Name: "x"}}
		},
			"any other kind takes apiVersion and fields"},
		"varsFrom Secret with fields": {func(tf *infrav1.Terraform) {
			tf.Spec.VarsFrom = []infrav1.VarsReference{{Kind: "Secret", Name: "x", Fields: []infrav1.FieldVariable{{Path: ".data", Name: "d"}}}}
		}, "a Secret or ConfigMap takes varsKeys"},
		"varsFrom Secret in another namespace": {func(tf *infrav1.Terraform) {
			tf.Spec.VarsFrom = []infrav1.VarsReference{{Kind: "Secret", Name: "x", Namespace: "other"}}
		}, "a Secret or ConfigMap takes varsKeys (in this object's namespace)"},
		"import with id and idFrom": {func(tf *infrav1.Terraform) {
			tf.Spec.Imports = []infrav1.Import{{To: "a.b", ID: "x", IDFrom: &infrav1.ImportIDReference{Kind: "Secret", Name: "s", Key: "id"}}}
		}, "set exactly one of id and idFrom"},
		"import address that injects code": {func(tf *infrav1.Terraform) {
			tf.Spec.Imports = []infrav1.Import{{To: "a.b\n}\nresource \"x\" \"y\" {", ID: "x"}}
		}, "spec.imports[0].to"},
		"variable name":             {func(tf *infrav1.Terraform) { tf.Spec.Vars = []infrav1.Variable{{Name: "1bad"}} }, "spec.vars[0].name"},
		"interval":                  {func(tf *infrav1.Terraform) { tf.Spec.Interval = metav1.Duration{Duration: -1} }, "spec.interval"},
		"interval below one second": {func(tf *infrav1.Terraform) { tf.Spec.Interval = metav1.Duration{Duration: 100 * time.Millisecond} }, "interval must be at least 1s"},
		"retryInterval below one second": {func(tf *infrav1.Terraform) {
			tf.Spec.RetryInterval = &metav1.Duration{Duration: 500 * time.Millisecond}
		}, "retryInterval must be at least 1s"},
		"backend secretSuffix with custom configuration": {func(tf *infrav1.Terraform) {
			tf.Spec.BackendConfig = &infrav1.BackendConfig{SecretSuffix: "x", CustomConfiguration: `terraform { backend "local" {} }`}
		}, "secretSuffix applies only to the default kubernetes backend"},
		"dependsOn another kind without apiVersion": {func(tf *infrav1.Terraform) {
			tf.Spec.DependsOn = []infrav1.DependencyReference{{Kind: "Database", Name: "pg"}}
		}, "dependsOn.apiVersion is required for kinds other than Terraform, Kustomization and HelmRelease"},
		"empty output selection": {func(tf *infrav1.Terraform) {
			tf.Spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{Name: "out", Outputs: []string{""}}
		}, "writeOutputsToSecret.outputs entries must not be empty"},
		"workspace over 63 characters": {func(tf *infrav1.Terraform) { tf.Spec.Workspace = strings.Repeat("w", 64) }, "spec.workspace"},
		"workspace that cannot be part of the state Secret's name": {func(tf *infrav1.Terraform) { tf.Spec.Workspace = "Prod_1" },
			"the workspace is part of the state Secret's name"},
		"secretSuffix over 63 characters": {func(tf *infrav1.Terraform) {
			tf.Spec.BackendConfig = &infrav1.BackendConfig{SecretSuffix: strings.Repeat("s", 64)}
		}, "spec.backendConfig.secretSuffix"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tf := &infrav1.Terraform{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invalid"},
				Spec: infrav1.TerraformSpec{
					SourceRef: infrav1.SourceReference{Kind: "GitRepository", Name: "repo"},
				},
			}
			tc.mutate(tf)
			err := k8sClient.Create(context.Background(), tf)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.field)))
		})
	}

	// Defaults are filled in by the API server.
	g := NewWithT(t)
	tf := &infrav1.Terraform{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "defaults"},
		Spec:       infrav1.TerraformSpec{SourceRef: infrav1.SourceReference{Kind: "GitRepository", Name: "none"}, Suspend: true},
	}
	g.Expect(k8sClient.Create(context.Background(), tf)).To(Succeed())
	g.Expect(tf.GetInterval().String()).To(Equal("10m0s"))
	g.Expect(tf.Spec.DeletionPolicy).To(Equal(infrav1.DeletionPolicyDelete))
	g.Expect(tf.Spec.Workspace).To(Equal("default"))
	g.Expect(tf.Spec.Path).To(Equal("./"))
	g.Expect(tf.Status.ObservedGeneration).To(Equal(int64(-1)))
}
