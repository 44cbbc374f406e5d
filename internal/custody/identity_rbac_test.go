package custody

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/landform-dev/landform/internal/testenv"
)

// The state identity is made under the controller's own ClusterRole
// (config/rbac/role.yaml, testenv.ControllerConfig), not as a cluster admin: RBAC lets it bind the
// state Role only once that Role exists and holds rules the controller
// has (no bind verb), so the RoleBinding must follow its Role. Each of a
// few fresh objects gets its identity and a token at the first try.
func TestIdentityUnderTheControllersClusterRole(t *testing.T) {
	g := NewWithT(t)
	env, err := testenv.Start()
	if err != nil {
		t.Fatalf("envtest (KUBEBUILDER_ASSETS or make tools): %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()

	cfg, err := env.ControllerConfig(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	k := &Keeper{Client: c, Reader: c, Objects: c, FieldOwner: "landform-test"}

	ns := env.Namespace(t)
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		obj := env.Terraform(t, ns, name)
		token, _, err := k.Issue(ctx, obj, 0)
		g.Expect(err).NotTo(HaveOccurred(), "the identity of %s at the first try", name)
		g.Expect(token).NotTo(BeEmpty())
		var rb rbacv1.RoleBinding
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "landform-state-" + name}, &rb)).To(Succeed())
	}
}
