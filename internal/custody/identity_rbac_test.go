package custody

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/landform-dev/landform/internal/testenv"
)

// The state identity is made under the controller's own ClusterRole
// (config/rbac/role.yaml), not as a cluster admin: RBAC lets it bind the
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

	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "config", "rbac", "role.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var role rbacv1.ClusterRole
	g.Expect(yaml.Unmarshal(b, &role)).To(Succeed())
	role.Name = "test-landform-controller"
	g.Expect(env.Client.Create(ctx, &role)).To(Succeed())
	home := env.Namespace(t)
	g.Expect(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: "controller"}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-landform-controller"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: home, Name: "controller"}},
	})).To(Succeed())

	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + home + ":controller"}
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
