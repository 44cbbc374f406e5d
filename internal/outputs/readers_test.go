package outputs

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// Every way a Pod spec reads a Secret is found, once each, init
// containers and projected volumes included.
func TestSecretReads(t *testing.T) {
	ref := func(name string) corev1.LocalObjectReference { return corev1.LocalObjectReference{Name: name} }
	spec := corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "migrate", EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref("db")}}}}},
		Containers: []corev1.Container{{Name: "app", Env: []corev1.EnvVar{
			{Name: "DSN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: ref("db"), Key: "dsn"}}},
			{Name: "PLAIN", Value: "x"},
			{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: ref("db"), Key: "mode"}}},
		}}},
		Volumes: []corev1.Volume{
			{Name: "infra", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db"}}},
			{Name: "both", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: ref("net")}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: ref("net")}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: ref("cfg")}},
			}}}},
		},
	}
	want := map[string][]string{
		"db":  {"envFrom of container migrate", "env DSN of container app", "volume infra"},
		"net": {"volume both"},
	}
	if diff := cmp.Diff(want, SecretReads(spec)); diff != "" {
		t.Errorf("SecretReads (-want +got):\n%s", diff)
	}
}
