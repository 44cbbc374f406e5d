package packaging

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kubeStateMetricsConfig is the file the chart's ConfigMap carries.
const kubeStateMetricsConfig = "config/monitoring/kube-state-metrics.yaml"

func readFile(t testing.TB, slashPath string) []byte {
	t.Helper()
	b, err := os.ReadFile(path(strings.Split(slashPath, "/")...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ksmConfig is the part of kube-state-metrics' CustomResourceStateMetrics
// that says where each label comes from.
type ksmConfig struct {
	Kind string `json:"kind"`
	Spec struct {
		Resources []struct {
			GroupVersionKind struct {
				Group, Version, Kind string
			} `json:"groupVersionKind"`
			MetricNamePrefix string `json:"metricNamePrefix"`
			Metrics          []struct {
				Name           string              `json:"name"`
				Help           string              `json:"help"`
				Path           []string            `json:"path"`
				LabelsFromPath map[string][]string `json:"labelsFromPath"`
				Each           struct {
					Type string `json:"type"`
					Info struct {
						Path           []string            `json:"path"`
						LabelsFromPath map[string][]string `json:"labelsFromPath"`
					} `json:"info"`
				} `json:"each"`
			} `json:"metrics"`
		} `json:"resources"`
	} `json:"spec"`
}

// resolve walks path through obj as kube-state-metrics does: a map key, a
// list index, or "[key=value]" for the list element whose key has that
// value. It returns the scalar found as kube-state-metrics prints it.
func resolve(obj any, path []string) (string, error) {
	cur := obj
	for i, p := range path {
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[p]
			if !ok {
				return "", fmt.Errorf("no %q at %v", p, path[:i])
			}
			cur = next
		case []any:
			if k, val, ok := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(p, "["), "]"), "="); ok && strings.HasPrefix(p, "[") {
				var found any
				for _, e := range v {
					if m, ok := e.(map[string]any); ok && fmt.Sprint(m[k]) == val {
						found = m
						break
					}
				}
				if found == nil {
					return "", fmt.Errorf("no element with %s=%s at %v", k, val, path[:i])
				}
				cur = found
				continue
			}
			n, err := strconv.Atoi(p)
			if err != nil || n < 0 || n >= len(v) {
				return "", fmt.Errorf("no element %q at %v", p, path[:i])
			}
			cur = v[n]
		default:
			return "", fmt.Errorf("%v is a %T, not a map or list", path[:i], cur)
		}
	}
	switch v := cur.(type) {
	case string, bool, int64, float64:
		return fmt.Sprint(v), nil
	}
	return "", fmt.Errorf("%v is a %T, not a value a label can take", path, cur)
}

// kube-state-metrics is not on the Go module proxy and cannot be built
// here, so this evaluates the configuration the way it would: every label
// path of every metric resolves, against a Terraform object created on the
// API server (so the group, version and kind are the CRD's) and given the
// status a Ready, suspended object has. No series is scraped from a real
// kube-state-metrics.
func TestKubeStateMetricsConfigResolves(t *testing.T) {
	var cfg ksmConfig
	readYAML(t, &cfg, strings.Split(kubeStateMetricsConfig, "/")...)
	if cfg.Kind != "CustomResourceStateMetrics" || len(cfg.Spec.Resources) != 1 {
		t.Fatalf("%s: kind %q with %d resources, want CustomResourceStateMetrics with Terraform's", kubeStateMetricsConfig, cfg.Kind, len(cfg.Spec.Resources))
	}
	res := cfg.Spec.Resources[0]
	if res.MetricNamePrefix != "gotk" || len(res.Metrics) != 1 || res.Metrics[0].Name != "resource_info" || res.Metrics[0].Each.Type != "Info" {
		t.Fatalf("want one Info metric gotk_resource_info, as Flux's configuration has: %+v", res)
	}

	ctx := context.Background()
	ensureNamespace(t, "ksm", nil)
	gvk := res.GroupVersionKind
	tf := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvk.Group + "/" + gvk.Version, "kind": gvk.Kind,
		"metadata": map[string]any{"namespace": "ksm", "name": "network"},
		"spec": map[string]any{
			"sourceRef": map[string]any{"kind": "GitRepository", "name": "infra"},
			"path":      "./network", "interval": "10m", "suspend": true,
		},
	}}
	if err := env.Client.Create(ctx, tf); err != nil {
		t.Fatalf("creating a %s from the configuration's group, version and kind: %v", gvk.Kind, err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), tf) })
	now := metav1.Now().UTC().Format(time.RFC3339)
	tf.Object["status"] = map[string]any{
		"observedGeneration":  int64(1),
		"lastAppliedRevision": "main@sha1:0123456789abcdef0123456789abcdef01234567",
		"conditions": []any{
			map[string]any{"type": "Reconciling", "status": "False", "reason": "Succeeded", "message": "done", "lastTransitionTime": now},
			map[string]any{"type": "Ready", "status": "True", "reason": "Succeeded", "message": "applied", "lastTransitionTime": now},
		},
	}
	if err := env.Client.Status().Update(ctx, tf); err != nil {
		t.Fatal(err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(tf.GroupVersionKind())
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tf), got); err != nil {
		t.Fatal(err)
	}

	labels := map[string]string{}
	m := res.Metrics[0]
	for _, set := range []struct {
		base   []string
		labels map[string][]string
	}{{m.Path, m.LabelsFromPath}, {append(append([]string{}, m.Path...), m.Each.Info.Path...), m.Each.Info.LabelsFromPath}} {
		for name, p := range set.labels {
			v, err := resolve(got.Object, append(append([]string{}, set.base...), p...))
			if err != nil {
				t.Errorf("label %s: %v", name, err)
				continue
			}
			labels[name] = v
		}
	}
	want := map[string]string{
		"name":               "network",
		"exported_namespace": "ksm",
		"ready":              "True",
		"reason":             "Succeeded",
		"suspended":          "true",
		"revision":           "main@sha1:0123456789abcdef0123456789abcdef01234567",
		"source_kind":        "GitRepository",
		"source_name":        "infra",
	}
	if diff := cmp.Diff(want, labels); diff != "" {
		t.Errorf("gotk_resource_info labels (-want +got):\n%s", diff)
	}
}

// The chart's ConfigMap carries the file itself (make chart-sync copies it).
func TestKubeStateMetricsConfigInChart(t *testing.T) {
	objs := helmTemplate(t, "--set", "metrics.kubeStateMetrics.enabled=true")
	cm := into[corev1.ConfigMap](t, find(t, objs, "ConfigMap", releaseNamespace, "landform-kube-state-metrics"))
	if diff := cmp.Diff(string(readFile(t, kubeStateMetricsConfig)), cm.Data["landform.yaml"]); diff != "" {
		t.Errorf("the ConfigMap's landform.yaml differs from %s (-file +ConfigMap):\n%s", kubeStateMetricsConfig, diff)
	}
	for _, o := range helmTemplate(t) {
		if o.GetKind() == "ConfigMap" {
			t.Errorf("by default the chart renders ConfigMap %s", o.GetName())
		}
	}
}
