package packaging

import (
	"context"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestRunnerServiceAccountHasNoPermission installs the runner namespace of
// both packagings for real and checks (SubjectAccessReviews against the API
// server's RBAC authorizer) that the runner Pods' ServiceAccount may do
// nothing: module code runs with it. Runners reach their state with the
// per-object state identity the controller creates.
func TestRunnerServiceAccountHasNoPermission(t *testing.T) {
	t.Run("chart", func(t *testing.T) {
		const ns = "runner-chart"
		ensureNamespace(t, ns, nil)
		var mine []*unstructured.Unstructured
		for _, o := range helmTemplate(t, "--set", "runner.namespaces={"+ns+"}") {
			if o.GetNamespace() == ns {
				mine = append(mine, o)
			}
		}
		apply(t, mine)
		checkNoAccess(t, ns, "landform-runner")
	})
	t.Run("kustomize", func(t *testing.T) {
		const ns = "runner-kustomize"
		ensureNamespace(t, ns, nil)
		apply(t, kustomizeBuild(t, runnerOverlay(t, ns)))
		checkNoAccess(t, ns, "landform-runner")
	})
}

// checkNoAccess checks that ServiceAccount ns/name may do none of what a
// module would want from the API server.
func checkNoAccess(t *testing.T, ns, name string) {
	user := "system:serviceaccount:" + ns + ":" + name
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	var denied []access
	for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete"} {
		denied = append(denied,
			access{ns, "", "secrets", verb, ""},
			access{ns, "", "secrets", verb, "tfstate-default-x"},
			access{ns, "coordination.k8s.io", "leases", verb, ""},
			access{"", "", "secrets", verb, ""}, // cluster-wide
		)
	}
	denied = append(denied,
		access{ns, "", "pods", "create", ""},
		access{ns, "", "pods/exec", "create", ""},
		access{ns, "", "configmaps", "get", ""},
		access{ns, "", "serviceaccounts/token", "create", ""},
		access{ns, "infra.landform.dev", "terraforms", "get", ""},
		access{ns, "rbac.authorization.k8s.io", "roles", "create", ""},
		access{"", "", "namespaces", "get", ""},
	)
	for _, a := range denied {
		if can(t, user, groups, a) {
			t.Errorf("%s may %s %s.%s %q in %q", user, a.verb, a.resource, a.group, a.name, a.namespace)
		}
	}
}

type access struct {
	namespace, group, resource, verb, name string
}

// can asks the API server's authorizer whether user may do a.
func can(t *testing.T, user string, groups []string, a access) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: a.namespace, Group: a.group, Resource: a.resource, Verb: a.verb, Name: a.name},
	}}
	if err := env.Client.Create(context.Background(), sar); err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}

// TestControllerCanSetUpStateIdentities: with nothing but the controller
// ClusterRole of the chart (the generated one), the controller can create
// an object's state identity — ServiceAccount, a Role naming only the state
// Secret and Lease (RBAC lets nobody grant what they do not hold), its
// RoleBinding, a token — and the state Secret and Lease. The identity may
// then use its state and nothing else. The controller may delete them all. (A real runner using it is
// controllers' TestRunnersReachOnlyTheirOwnState.)
func TestControllerCanSetUpStateIdentities(t *testing.T) {
	const ns = "state-identity"
	ensureNamespace(t, ns, nil)
	ctx := context.Background()
	role := find(t, helmTemplate(t), "ClusterRole", "", "landform-controller")
	role.SetName("landform-controller-identity-test")
	apply(t, []*unstructured.Unstructured{role})
	controller := "system:serviceaccount:landform-system:landform-controller"
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "landform-controller-identity-test"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.GetName()},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "landform-system", Name: "landform-controller"}},
	}
	if err := env.Client.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	asController := clientFor(t, kubeconfig(t, controller, "system:serviceaccounts", "system:serviceaccounts:landform-system", "system:authenticated"))

	const state, lease, id = "tfstate-default-rbac", "lock-tfstate-default-rbac", "landform-state-rbac"
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: id}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: id}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{state}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{lease}, Verbs: []string{"get", "update", "patch"}},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: id},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: id},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: id}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: state, Labels: map[string]string{
			"tfstate": "true", "tfstateSecretSuffix": "rbac", "tfstateWorkspace": "default", "app.kubernetes.io/managed-by": "terraform"}}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease}},
	}
	// The authorizer learns the binding from its informers: retry the first
	// write until it does.
	deadline := time.Now().Add(30 * time.Second)
	for i, o := range objs {
		for {
			err := asController.Create(ctx, o)
			if err == nil || apierrors.IsAlreadyExists(err) {
				break
			}
			if i > 0 || !apierrors.IsForbidden(err) || time.Now().After(deadline) {
				t.Fatalf("the controller creating %T %s: %v", o, o.GetName(), err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	tr := &authenticationv1.TokenRequest{}
	if err := asController.SubResource("token").Create(ctx, objs[0], tr); err != nil || tr.Status.Token == "" {
		t.Fatalf("the controller issuing a token for the state identity: %v", err)
	}

	user := "system:serviceaccount:" + ns + ":" + id
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	deadline = time.Now().Add(30 * time.Second)
	for !can(t, user, groups, access{ns, "", "secrets", "get", state}) {
		if time.Now().After(deadline) {
			t.Fatal("the state identity never got its state Secret")
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, verb := range []string{"get", "update", "patch"} {
		for _, a := range []access{{ns, "", "secrets", verb, state}, {ns, "coordination.k8s.io", "leases", verb, lease}} {
			if !can(t, user, groups, a) {
				t.Errorf("the state identity may not %s %s %s", verb, a.resource, a.name)
			}
		}
		for _, other := range []string{"tfplan-rbac-0", "rbac-outputs", "tflogs-rbac", "tfstate-default-other"} {
			if can(t, user, groups, access{ns, "", "secrets", verb, other}) {
				t.Errorf("the state identity may %s Secret %s", verb, other)
			}
		}
	}
	for _, a := range []access{{ns, "", "secrets", "list", ""}, {ns, "", "secrets", "create", ""}, {ns, "", "secrets", "delete", state}, {ns, "coordination.k8s.io", "leases", "create", ""}} {
		if can(t, user, groups, a) {
			t.Errorf("the state identity may %s %s %q", a.verb, a.resource, a.name)
		}
	}

	// When the object's deletion is done, the controller removes the
	// identity (it lost its owner reference for the destroy).
	for i := len(objs) - 1; i >= 0; i-- {
		if err := asController.Delete(ctx, objs[i]); err != nil {
			t.Errorf("the controller deleting %T %s: %v", objs[i], objs[i].GetName(), err)
		}
	}
}

func clientFor(t *testing.T, kubeconfig string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
