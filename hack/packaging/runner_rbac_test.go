package packaging

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestRunnerRBACIsEnoughForStateAndNothingMore installs the runner RBAC
// of both packagings for real and checks, as the runner's ServiceAccount,
// that OpenTofu's kubernetes backend can lock, write and read its state in
// the runner's namespace and in no other, and that the ServiceAccount may
// do nothing else there or anywhere (SubjectAccessReviews against the API
// server's RBAC authorizer).
func TestRunnerRBACIsEnoughForStateAndNothingMore(t *testing.T) {
	ensureNamespace(t, "runner-elsewhere", nil)
	t.Run("chart", func(t *testing.T) {
		const ns = "runner-chart"
		ensureNamespace(t, ns, nil)
		var runnerObjs = helmTemplate(t, "--set", "runner.namespaces={"+ns+"}")
		var mine = runnerObjs[:0]
		for _, o := range runnerObjs {
			if o.GetNamespace() == ns {
				mine = append(mine, o)
			}
		}
		apply(t, mine)
		checkRunnerAccess(t, ns)
	})
	t.Run("kustomize", func(t *testing.T) {
		const ns = "runner-kustomize"
		ensureNamespace(t, ns, nil)
		apply(t, readObjects(t, "config", "rbac", "runner_role.yaml"))
		apply(t, kustomizeBuild(t, runnerOverlay(t, ns)))
		checkRunnerAccess(t, ns)
	})
}

func checkRunnerAccess(t *testing.T, ns string) {
	user := "system:serviceaccount:" + ns + ":landform-runner"
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}

	type access struct {
		namespace, group, resource, verb string
	}
	var allowed, denied []access
	for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete"} {
		allowed = append(allowed, access{ns, "", "secrets", verb}, access{ns, "coordination.k8s.io", "leases", verb})
		denied = append(denied,
			access{"runner-elsewhere", "", "secrets", verb},
			access{"runner-elsewhere", "coordination.k8s.io", "leases", verb},
			access{"", "", "secrets", verb}, // cluster-wide
			access{releaseNamespace, "", "secrets", verb},
		)
	}
	for _, a := range []access{
		{ns, "", "pods", "create"},
		{ns, "", "pods", "list"},
		{ns, "", "pods/exec", "create"},
		{ns, "", "configmaps", "get"},
		{ns, "", "serviceaccounts", "get"},
		{ns, "", "serviceaccounts/token", "create"},
		{ns, "", "events", "create"},
		{ns, "infra.landform.dev", "terraforms", "get"},
		{ns, "source.toolkit.fluxcd.io", "gitrepositories", "get"},
		{ns, "rbac.authorization.k8s.io", "roles", "create"},
		{ns, "rbac.authorization.k8s.io", "rolebindings", "create"},
		{"", "", "namespaces", "get"},
	} {
		denied = append(denied, a)
	}
	ctx := context.Background()
	check := func(a access, want bool) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: a.namespace, Group: a.group, Resource: a.resource, Verb: a.verb},
		}}
		if err := env.Client.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != want {
			t.Errorf("%s %s %s.%s in %q: allowed=%v, want %v", user, a.verb, a.resource, a.group, a.namespace, sar.Status.Allowed, want)
		}
	}
	// The API server's authorizer learns new Roles and RoleBindings from its
	// own informers: wait until it knows this one before judging it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Resource: "secrets", Verb: "get"},
		}}
		if err := env.Client.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, a := range allowed {
		check(a, true)
	}
	for _, a := range denied {
		check(a, false)
	}

	// The real thing: OpenTofu's kubernetes backend as that ServiceAccount.
	kc := kubeconfig(t, user, groups...)
	work := tofuModule(t, ns, kc)
	tofu(t, work, "init", "-input=false")
	tofu(t, work, "apply", "-input=false", "-auto-approve")
	var state corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tfstate-default-rbac"}, &state); err != nil {
		t.Errorf("the state Secret after apply: %v", err)
	}
	if out := tofu(t, work, "output", "-raw", "probe"); out != "runner rbac" {
		t.Errorf("output read back from the state: %q", out)
	}
	tofu(t, work, "destroy", "-input=false", "-auto-approve")

	// The same ServiceAccount cannot keep state in another namespace.
	elsewhere := tofuModule(t, "runner-elsewhere", kc)
	out, err := tofuErr(elsewhere, "init", "-input=false")
	if err == nil || !strings.Contains(out, "forbidden") {
		t.Errorf("tofu init with state in another namespace: err=%v, want forbidden:\n%s", err, out)
	}
}

// tofuModule writes a module that keeps its state with the kubernetes
// backend in ns and needs no provider download (terraform_data is built in).
func tofuModule(t *testing.T, ns, kubeconfig string) string {
	t.Helper()
	dir := t.TempDir()
	main := fmt.Sprintf(`terraform {
  backend "kubernetes" {
    secret_suffix = "rbac"
    namespace     = %q
    config_path   = %q
  }
}

resource "terraform_data" "probe" {
  input = "runner rbac"
}

output "probe" {
  value = terraform_data.probe.output
}
`, ns, kubeconfig)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func tofu(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := tofuErr(dir, args...)
	if err != nil {
		t.Fatalf("tofu %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func tofuErr(dir string, args ...string) (string, error) {
	bin := os.Getenv("LANDFORM_TOFU")
	if bin == "" {
		bin = path("bin", "tofu")
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("tofu not found at %s: run `make tools`, or set LANDFORM_TOFU", bin)
	}
	// Our own empty CLI config: the machine's may point at a missing file.
	cliConfig := filepath.Join(dir, ".tofurc")
	if err := os.WriteFile(cliConfig, nil, 0o644); err != nil {
		return "", err
	}
	cmd := exec.Command(bin, append([]string{"-chdir=" + dir}, append(args, "-no-color")...)...)
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+cliConfig, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}
