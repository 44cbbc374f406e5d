package cli

import (
	"context"
	"maps"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/keptartifact"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/owned"
	"github.com/landform-dev/landform/internal/runlog"
	"github.com/landform-dev/landform/internal/statehistory"
	"github.com/landform-dev/landform/internal/unsavedstate"
)

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// ownedSecret creates a Secret labelled as Landform labels the ones it
// writes for obj, plus extra labels.
func ownedSecret(t *testing.T, obj *v1alpha1.Terraform, name string, extra map[string]string) {
	t.Helper()
	l := owned.Labels(obj)
	maps.Copy(l, extra)
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: name, Labels: l}})
}

func TestTree(t *testing.T) {
	ns := namespace(t, "tree")
	db := terraform(t, ns, "db", func(obj *v1alpha1.Terraform) {
		states[objReady](obj)
		obj.Spec.WriteOutputsToSecret = &v1alpha1.WriteOutputsToSecretSpec{Name: "db-outputs"}
	})
	other := terraform(t, ns, "cache", applied)
	terraform(t, ns, objNew, nil)

	storePlan(t, db, appliedPlan, rev1, true)
	storePlan(t, db, pendingPlan, rev2, false)
	storePlan(t, other, appliedPlan, rev1, true)
	ownedSecret(t, db, "tfartifact-db-0", map[string]string{keptartifact.ArtifactLabel: "true"})
	ownedSecret(t, db, unsavedstate.SecretName(db), map[string]string{unsavedstate.Label: "true"})
	ownedSecret(t, db, statehistory.Name(db, 2), map[string]string{statehistory.Label: names.Label(db.Name)})
	ownedSecret(t, db, statehistory.Name(db, 1), map[string]string{statehistory.Label: names.Label(db.Name)})
	ownedSecret(t, db, runlog.SecretName(db.Name), nil)
	ownedSecret(t, db, "db-outputs", nil)
	ownedSecret(t, other, runlog.SecretName(other.Name), nil)

	podLabels := owned.Labels(db)
	podLabels[nameLabel] = runnerPodValue
	identity := metav1.ObjectMeta{Namespace: ns, Name: names.StateIdentity(db)}
	create(t,
		&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-runner-x7k2p", Labels: podLabels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "runner", Image: "ghcr.io/landform-dev/landform-runner:v0.5.0"}}},
		},
		// Not a runner Pod: it lacks the runner's name label.
		&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-debug", Labels: owned.Labels(db)},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "debug", Image: "busybox"}}},
		},
		&corev1.ServiceAccount{ObjectMeta: identity},
		&rbacv1.Role{ObjectMeta: identity},
		&rbacv1.RoleBinding{ObjectMeta: identity, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: identity.Name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: identity.Name, Namespace: ns}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.StateSecret(db), Labels: map[string]string{"tfstate": "true"}}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.StateLease(db)}},
	)

	for _, tt := range []struct {
		golden string
		args   []string
	}{
		{"tree/all", []string{"tree", "-n", ns, "db"}},
		{"tree/some", []string{"tree", "-n", ns, "cache"}},
		{"tree/none", []string{"tree", "-n", ns, objNew}},
		{"tree/not-found", []string{"tree", "-n", ns, "missing"}},
		{"tree/yaml", []string{"tree", "-n", ns, "cache", "-o", "yaml"}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			golden(t, tt.golden, run(t, "", tt.args...).transcript())
		})
	}
}
