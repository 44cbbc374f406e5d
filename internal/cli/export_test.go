package cli

import (
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

func TestExport(t *testing.T) {
	ns := namespace(t, "export")
	other := namespace(t, "export-b")
	terraform(t, ns, "db", func(obj *v1alpha1.Terraform) {
		states[objPending](obj)
		obj.Labels = map[string]string{"team": "a", "export": "yes"}
		obj.Annotations = map[string]string{"docs": "https://wiki/db", v1alpha1.ApproveAnnotation: pendingPlan}
		obj.Spec.Interval = metav1.Duration{Duration: 10 * time.Minute}
		obj.Spec.Vars = []v1alpha1.Variable{{Name: "size", Value: &apiextensionsv1.JSON{Raw: []byte(`"small"`)}}}
	})
	exported := func(obj *v1alpha1.Terraform) {
		applied(obj)
		obj.Labels = map[string]string{"export": "yes"}
	}
	terraform(t, ns, "cache", exported)
	terraform(t, other, "network", exported)
	empty := namespace(t, "export-empty")

	for _, tt := range []struct {
		golden string
		args   []string
	}{
		{"export/one", []string{"export", "-n", ns, "db"}},
		{"export/all", []string{"export", "-n", ns, "--all"}},
		{"export/all-namespaces", []string{"export", "--all", "-A", "-l", "export=yes"}},
		{"export/empty", []string{"export", "-n", empty, "--all"}},
		{"export/not-found", []string{"export", "-n", ns, "missing"}},
		{"export/no-name", []string{"export", "-n", ns}},
		{"export/name-and-all", []string{"export", "-n", ns, "db", "--all"}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			golden(t, tt.golden, run(t, "", tt.args...).transcript())
		})
	}
}
