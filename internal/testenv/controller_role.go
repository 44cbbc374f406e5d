package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// The ServiceAccount ControllerConfig acts as.
const (
	controllerAccountNamespace = "landform-system"
	controllerAccount          = "landform-controller"
)

// ControllerConfig is Config acting as the controller does in a cluster:
// a ServiceAccount bound to the ClusterRole of config/rbac/role.yaml (the
// chart's), and nothing more. A test that runs the controller as the
// API server's admin passes whatever RBAC the controller lacks; one that
// runs it under ControllerConfig fails where a cluster would.
func (e *Env) ControllerConfig(ctx context.Context) (*rest.Config, error) {
	b, err := os.ReadFile(filepath.Join(repoRoot(), "config", "rbac", "role.yaml"))
	if err != nil {
		return nil, fmt.Errorf("the controller's ClusterRole: %w", err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(b, &role); err != nil {
		return nil, fmt.Errorf("config/rbac/role.yaml: %w", err)
	}
	role.Name = "test-" + controllerAccount
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controllerAccountNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: controllerAccountNamespace, Name: controllerAccount}},
		&role,
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: controllerAccountNamespace, Name: controllerAccount}},
		},
	} {
		if err := e.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + controllerAccountNamespace + ":" + controllerAccount}
	return cfg, nil
}
