package packaging

import (
	"os"
	"regexp"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The runner NetworkPolicy that docs/security.md gives operators admits
// the runner port from every Pod of the chart's controller Deployments,
// the shards' included: a policy that missed one would cut a shard off
// its runners.
func TestNetworkPolicyAdmitsEveryControllerPod(t *testing.T) {
	doc, err := os.ReadFile(path("docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```yaml\n(apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n.*?)```").FindSubmatch(doc)
	if block == nil {
		t.Fatal("docs/security.md has no NetworkPolicy block")
	}
	var np networkingv1.NetworkPolicy
	if err := utilyaml.Unmarshal(block[1], &np); err != nil {
		t.Fatalf("the documented NetworkPolicy: %v", err)
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 || np.Spec.Ingress[0].From[0].PodSelector == nil {
		t.Fatalf("the documented NetworkPolicy has not one ingress rule from a pod selector: %+v", np.Spec.Ingress)
	}
	from := np.Spec.Ingress[0].From[0]
	pods, err := metav1.LabelSelectorAsSelector(from.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	namespaces, err := metav1.LabelSelectorAsSelector(from.NamespaceSelector)
	if err != nil {
		t.Fatal(err)
	}
	if !namespaces.Matches(labels.Set{"kubernetes.io/metadata.name": releaseNamespace}) {
		t.Errorf("the policy's namespace selector %s does not select the release namespace %s", namespaces, releaseNamespace)
	}
	deployments := 0
	for _, obj := range helmTemplate(t, "--set", "shards={a,b}") {
		if obj.GetKind() != "Deployment" {
			continue
		}
		var d struct {
			Spec struct {
				Template struct {
					Metadata metav1.ObjectMeta `json:"metadata"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &d); err != nil {
			t.Fatal(err)
		}
		deployments++
		if podLabels := d.Spec.Template.Metadata.Labels; !pods.Matches(labels.Set(podLabels)) {
			t.Errorf("the documented NetworkPolicy does not admit the Pods of Deployment %s (labels %v)", obj.GetName(), podLabels)
		}
	}
	if deployments != 3 {
		t.Errorf("rendered %d controller Deployments with two shards, want 3", deployments)
	}
}
