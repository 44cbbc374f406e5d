package cli

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// TestTrace: from an outputs Secret, or from a Deployment whose Pods read
// one, to the Terraform object, revision and plan that wrote it.
func TestTrace(t *testing.T) {
	ns := namespace(t, "trace")
	ctx := context.Background()
	terraform(t, ns, "database", func(obj *v1alpha1.Terraform) {
		obj.Spec.WriteOutputsToSecret = &v1alpha1.WriteOutputsToSecretSpec{Name: "database-outputs"}
		applied(obj)
	})
	labels := map[string]string{"app": "app"}
	for _, o := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "database-outputs"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tls"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "app", Image: "app:1", Env: []corev1.EnvVar{{Name: "DATABASE_DSN",
					ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "database-outputs"}, Key: "dsn"}}}}}},
				Volumes: []corev1.Volume{
					{Name: "infra", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "database-outputs"}}},
					{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls"}}},
				},
			}},
		}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"}, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}},
		}},
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		golden string
		args   []string
	}{
		{"trace/deployment", []string{"trace", "-n", ns, "deployment/app"}},
		{"trace/secret", []string{"trace", "-n", ns, "secret/database-outputs"}},
		{"trace/unrelated", []string{"trace", "-n", ns, "deployment/plain"}},
		{"trace/json", []string{"trace", "-n", ns, "deployments.apps/app", "-o", "json"}},
		{"trace/not-found", []string{"trace", "-n", ns, "deployment/missing"}},
		{"trace/no-kind", []string{"trace", "-n", ns, "app"}},
		{"trace/bad-kind", []string{"trace", "-n", ns, "gizmo/app"}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			golden(t, tt.golden, normalize(run(t, "", tt.args...).transcript()))
		})
	}
}
