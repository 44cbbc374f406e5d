package controllers

import (
	"testing"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// A reconciled object has Flux's gotk_* series (what Flux's dashboards
// read) beside Landform's own, labelled with its kind, namespace and name;
// its series go with it.
func TestFluxMetricsForATerraformObject(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	tf, _ := newFileTerraform(t, ns, "metrics", "metrics", nil)
	waitReady(t, tf)

	obj := map[string]string{"kind": infrav1.TerraformKind, "namespace": ns, "name": tf.Name}
	with := func(extra map[string]string) map[string]string {
		l := map[string]string{}
		for _, m := range []map[string]string{obj, extra} {
			for k, v := range m {
				l[k] = v
			}
		}
		return l
	}
	g.Eventually(func(g Gomega) {
		families := gather(g)
		g.Expect(gaugeValue(families, "gotk_reconcile_condition", with(map[string]string{"type": "Ready", "status": "True"}))).To(Equal(1.0))
		g.Expect(gaugeValue(families, "gotk_reconcile_condition", with(map[string]string{"type": "Ready", "status": "False"}))).To(Equal(0.0))
		g.Expect(gaugeValue(families, "gotk_reconcile_condition", with(map[string]string{"type": "Stalled", "status": "Unknown"}))).To(Equal(1.0), "an absent condition is Unknown, as Flux records it")
		g.Expect(gaugeValue(families, "gotk_suspend_status", obj)).To(Equal(0.0))
		g.Expect(histogramCount(families, "gotk_reconcile_duration_seconds", obj)).To(BeNumerically(">", 0))
		g.Expect(gaugeValue(families, "landform_plan_pending", map[string]string{"namespace": ns, "name": tf.Name})).To(Equal(0.0))
		g.Expect(gaugeValue(families, "landform_drifted", map[string]string{"namespace": ns, "name": tf.Name})).To(Equal(0.0))
		g.Expect(counterValue(families, "landform_runs_total", map[string]string{"action": "apply", "result": "success"})).To(BeNumerically(">=", 1))
	}).WithTimeout(waitTimeout).WithPolling(pollEvery).Should(Succeed())

	deleteAndWait(t, tf)
	g.Eventually(func(g Gomega) {
		families := gather(g)
		for _, name := range []string{"gotk_reconcile_condition", "gotk_suspend_status", "gotk_reconcile_duration_seconds"} {
			g.Expect(find(families, name, obj)).To(BeEmpty(), name)
		}
		g.Expect(find(families, "landform_plan_pending", map[string]string{"namespace": ns, "name": tf.Name})).To(BeEmpty())
	}).WithTimeout(waitTimeout).WithPolling(pollEvery).Should(Succeed())
}

// Event metadata carries names, ids, counts and booleans, under the
// object's API group (notification-controller forwards nothing else).
func TestEventMetadata(t *testing.T) {
	withPlan := &infrav1.Terraform{Status: infrav1.TerraformStatus{
		Plan:       &infrav1.PlanStatus{ID: "plan-a", Add: 1, Change: 2, Destroy: 3, Replace: 1},
		Conditions: []metav1.Condition{{Type: infrav1.DriftedCondition, Status: metav1.ConditionTrue}},
	}}
	for _, c := range []struct {
		name     string
		obj      *infrav1.Terraform
		id, rev  string
		expected map[string]string
	}{
		{"revision only", &infrav1.Terraform{}, "", "main@sha1:abc", map[string]string{
			"infra.landform.dev/revision": "main@sha1:abc",
		}},
		{"the plan status summarises", withPlan, "plan-a", "main@sha1:abc", map[string]string{
			"infra.landform.dev/revision": "main@sha1:abc",
			"infra.landform.dev/plan":     "plan-a",
			"infra.landform.dev/add":      "1",
			"infra.landform.dev/change":   "2",
			"infra.landform.dev/destroy":  "3",
			"infra.landform.dev/replace":  "1",
			"infra.landform.dev/drift":    "true",
		}},
		{"another plan: its id, no counts", withPlan, "plan-b", "", map[string]string{
			"infra.landform.dev/plan":  "plan-b",
			"infra.landform.dev/drift": "true",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			NewWithT(t).Expect(eventMetadata(c.obj, c.id, c.rev)).To(Equal(c.expected))
		})
	}
}

func gather(g Gomega) []*dto.MetricFamily {
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	return families
}

// find returns the metrics of family name whose labels include labels.
func find(families []*dto.MetricFamily, name string, labels map[string]string) []*dto.Metric {
	var found []*dto.Metric
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metrics
				}
			}
			found = append(found, m)
		}
	}
	return found
}

func gaugeValue(families []*dto.MetricFamily, name string, labels map[string]string) float64 {
	ms := find(families, name, labels)
	if len(ms) != 1 {
		return -1
	}
	return ms[0].GetGauge().GetValue()
}

func counterValue(families []*dto.MetricFamily, name string, labels map[string]string) float64 {
	ms := find(families, name, labels)
	if len(ms) != 1 {
		return -1
	}
	return ms[0].GetCounter().GetValue()
}

func histogramCount(families []*dto.MetricFamily, name string, labels map[string]string) uint64 {
	ms := find(families, name, labels)
	if len(ms) != 1 {
		return 0
	}
	return ms[0].GetHistogram().GetSampleCount()
}
