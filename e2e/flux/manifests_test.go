package flux

import (
	"encoding/json"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// The manifests the scenarios commit are built from the API types, so that
// they cannot drift from the CRDs, and rendered as a user would write them.

// manifest renders obj as YAML to commit: without status and the fields the
// server sets.
func manifest(obj runtime.Object) string {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		panic(err)
	}
	delete(u, "status")
	unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u, "spec", "template", "metadata", "creationTimestamp")
	b, err := yaml.Marshal(u)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func variable(name string, value any) infrav1.Variable {
	b, err := json.Marshal(value)
	if err != nil {
		panic(err)
	}
	return infrav1.Variable{Name: name, Value: &apiextensionsv1.JSON{Raw: b}}
}

// terraform is a Terraform object on path in the scenario's repository,
// applying every plan, retrying after 5s.
func terraform(ns, name, path string, vars ...infrav1.Variable) *infrav1.Terraform {
	return &infrav1.Terraform{
		TypeMeta:   metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: infrav1.TerraformKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: infrav1.TerraformSpec{
			SourceRef:     infrav1.SourceReference{Kind: sourcev1.GitRepositoryKind, Name: repoName},
			Path:          path,
			Interval:      metav1.Duration{Duration: 10 * time.Minute},
			RetryInterval: &metav1.Duration{Duration: 5 * time.Second},
			ApprovePlan:   infrav1.ApprovePlanAuto,
			Vars:          vars,
		},
	}
}

// appInfra is a Terraform object on modules/app-infra: a database called
// cloudName and a security group called <cloudName>-db in the stand-in
// cloud, every output written into Secret <name>-outputs.
func appInfra(ns, name, cloudName string, sizeGB int) *infrav1.Terraform {
	tf := terraform(ns, name, "./modules/app-infra", variable("name", cloudName), variable("db_size_gb", sizeGB))
	tf.Spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{Name: name + "-outputs"}
	return tf
}

// fileModule is a Terraform object on modules/file writing content to path
// (absolute: local runners run on this machine, so the test can read it).
func fileModule(ns, name, path, content string) *infrav1.Terraform {
	tf := terraform(ns, name, "./modules/file", variable("path", path), variable("content", content))
	tf.Spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{Name: name + "-outputs", Outputs: []string{"path", "sha256"}}
	return tf
}

// configMap is a plain object for a Kustomization to apply.
func configMap(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data:       map[string]string{"owner": "e2e"},
	}
}

// appDeployment is an app that takes modules/app-infra's outputs from
// Secret outputs: the security group and the size substituted by Flux
// (postBuild.substituteFrom), the DSN mounted from the Secret. The
// environment has no kubelet: the Deployment is an object that runs no Pods.
func appDeployment(ns, outputs string) *appsv1.Deployment {
	labels := map[string]string{"app": "app"}
	replicas := int32(1)
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app", Annotations: map[string]string{
			"landform.dev/security-group": "${security_group_id}",
			// Flux substitutes into the rendered YAML: the value must
			// stay a string.
			"landform.dev/db-size": "${db_size_gb}GB",
		}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "app",
					Image: "registry.invalid/app:1",
					Env: []corev1.EnvVar{{Name: "DATABASE_DSN", ValueFrom: &corev1.EnvVarSource{
						SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: outputs}, Key: "dsn"},
					}}},
				}}},
			},
		},
	}
}
