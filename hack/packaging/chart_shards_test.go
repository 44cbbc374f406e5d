package packaging

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestChartShards: with shards, the main Deployment takes the unlabelled
// Terraform objects and each shard its own, as Flux's controllers shard;
// every Deployment runs the same Pod, no Deployment's selector selects
// another's Pods, and the metrics Service selects them all.
func TestChartShards(t *testing.T) {
	objs := helmTemplate(t, "--set", "shards={shard1,shard2}")
	ns := releaseNamespace
	selectors := map[string]string{
		"landform-controller":        "--watch-label-selector=!sharding.fluxcd.io/key",
		"landform-controller-shard1": "--watch-label-selector=sharding.fluxcd.io/key in (shard1)",
		"landform-controller-shard2": "--watch-label-selector=sharding.fluxcd.io/key in (shard2)",
	}
	deps := map[string]*appsv1.Deployment{}
	for name := range selectors {
		deps[name] = into[appsv1.Deployment](t, find(t, objs, "Deployment", ns, name))
	}
	mainArgs := deps["landform-controller"].Spec.Template.Spec.Containers[0].Args
	for name, selector := range selectors {
		dep := deps[name]
		checkControllerPod(t, dep, 8080, 8081)
		args := dep.Spec.Template.Spec.Containers[0].Args
		var got []string
		for _, a := range args {
			if strings.HasPrefix(a, "--watch-label-selector") {
				got = append(got, a)
			}
		}
		if diff := cmp.Diff([]string{selector}, got); diff != "" {
			t.Errorf("%s: --watch-label-selector (-want +got):\n%s", name, diff)
		}
		// Otherwise the same controller: only the selector differs.
		if diff := cmp.Diff(without(mainArgs, selectors["landform-controller"]), without(args, selector)); diff != "" {
			t.Errorf("%s: args other than the selector differ from the main Deployment's (-main +%s):\n%s", name, name, diff)
		}
		for other, o := range deps {
			if other != name && selects(dep.Spec.Selector.MatchLabels, o.Spec.Template.Labels) {
				t.Errorf("the selector of %s %v selects the Pods of %s %v", name, dep.Spec.Selector.MatchLabels, other, o.Spec.Template.Labels)
			}
		}
	}
	svc := into[corev1.Service](t, find(t, objs, "Service", ns, "landform-controller-metrics"))
	for name, dep := range deps {
		if !selects(svc.Spec.Selector, dep.Spec.Template.Labels) {
			t.Errorf("the metrics Service's selector %v does not select the Pods of %s %v", svc.Spec.Selector, name, dep.Spec.Template.Labels)
		}
	}

	// Without shards, no selector: one controller takes every object.
	def := into[appsv1.Deployment](t, find(t, helmTemplate(t), "Deployment", ns, "landform-controller"))
	for _, a := range def.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--watch-label-selector") {
			t.Errorf("without shards the controller gets %s", a)
		}
	}

	ensureNamespace(t, ns, nil)
	dryRunApply(t, objs)
}

func without(args []string, drop string) []string {
	var out []string
	for _, a := range args {
		if a != drop {
			out = append(out, a)
		}
	}
	return out
}
