package packaging

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestKustomizeCRDListsEveryGeneratedCRD: a CRD added to config/crd/bases
// by `make generate` must be added to config/crd/kustomization.yaml too.
func TestKustomizeCRDListsEveryGeneratedCRD(t *testing.T) {
	var k struct {
		Resources []string `json:"resources"`
	}
	readYAML(t, &k, "config", "crd", "kustomization.yaml")
	files, _ := filepath.Glob(path("config", "crd", "bases", "*.yaml"))
	var want []string
	for _, f := range files {
		want = append(want, "bases/"+filepath.Base(f))
	}
	sort.Strings(k.Resources)
	if diff := cmp.Diff(want, k.Resources); diff != "" {
		t.Errorf("config/crd/kustomization.yaml resources (-generated +listed):\n%s", diff)
	}
}

func TestKustomizeDefault(t *testing.T) {
	objs := kustomizeBuild(t, "config/default")
	const ns = "landform-system"
	checkObjects(t, objs, ns, "Namespace/"+ns)

	cr := into[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "", "landform-controller"))
	if diff := cmp.Diff(generatedRules(t), cr.Rules); diff != "" {
		t.Errorf("ClusterRole landform-controller is not config/rbac/role.yaml (-generated +built):\n%s", diff)
	}
	crb := into[rbacv1.ClusterRoleBinding](t, find(t, objs, "ClusterRoleBinding", "", "landform-controller"))
	if diff := cmp.Diff([]rbacv1.Subject{{Kind: "ServiceAccount", Name: "landform-controller", Namespace: ns}}, crb.Subjects); diff != "" {
		t.Errorf("ClusterRoleBinding subjects (-want +got):\n%s", diff)
	}
	nsObj := into[corev1.Namespace](t, find(t, objs, "Namespace", "", ns))
	if nsObj.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("namespace %s labels %v: want the restricted Pod Security Standard enforced", ns, nsObj.Labels)
	}

	// The same controller as the chart's defaults: one Pod spec, two
	// packagings.
	dep := into[appsv1.Deployment](t, find(t, objs, "Deployment", ns, "landform-controller"))
	checkControllerPod(t, dep, 8080, 8081)
	chart := into[appsv1.Deployment](t, find(t, helmTemplate(t), "Deployment", releaseNamespace, "landform-controller"))
	if diff := cmp.Diff(chart.Spec.Template.Spec, dep.Spec.Template.Spec); diff != "" {
		t.Errorf("config/manager's Pod spec differs from the chart's defaults (-chart +kustomize):\n%s", diff)
	}
	chartRole := into[rbacv1.Role](t, find(t, helmTemplate(t), "Role", releaseNamespace, "landform-leader-election"))
	role := into[rbacv1.Role](t, find(t, objs, "Role", ns, "landform-leader-election"))
	if diff := cmp.Diff(chartRole.Rules, role.Rules); diff != "" {
		t.Errorf("leader election Role differs from the chart's (-chart +kustomize):\n%s", diff)
	}

	dryRunApply(t, objs)
}

// TestKustomizeRunnerNamespace: config/runner, given a namespace, creates
// that namespace's landform-runner ServiceAccount, and nothing that grants
// it anything.
func TestKustomizeRunnerNamespace(t *testing.T) {
	objs := kustomizeBuild(t, runnerOverlay(t, "team-k"))
	want := []string{"ServiceAccount/team-k/landform-runner"}
	if diff := cmp.Diff(want, keys(objs)); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	ensureNamespace(t, "team-k", nil)
	dryRunApply(t, objs)
}

// runnerOverlay writes a kustomization that uses config/runner in ns, as a
// user would.
func runnerOverlay(t *testing.T, ns string) string {
	t.Helper()
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, path("config", "runner"))
	if err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + ns + "\nresources:\n  - " + filepath.ToSlash(rel) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestKustomizeSamples(t *testing.T) {
	objs := kustomizeBuild(t, "config/samples")
	want := []string{
		"GitRepository/default/landform",
		"ServiceAccount/default/landform-runner",
		"Terraform/default/hello",
	}
	if diff := cmp.Diff(want, keys(objs)); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	tf := find(t, objs, "Terraform", "default", "hello")
	if ref, _, _ := unstructured.NestedString(tf.Object, "spec", "sourceRef", "name"); ref != "landform" {
		t.Errorf("the sample Terraform uses source %q, not the sample GitRepository", ref)
	}
	dryRunApply(t, objs)
}

// TestKustomizeBasesBuild: each base builds on its own, as users reference
// them one by one.
func TestKustomizeBasesBuild(t *testing.T) {
	for _, dir := range []string{"config/crd", "config/rbac", "config/manager", "config/runner"} {
		t.Run(dir, func(t *testing.T) {
			if objs := kustomizeBuild(t, dir); len(objs) == 0 {
				t.Fatal("no objects")
			}
		})
	}
}
