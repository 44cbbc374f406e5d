package custody

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/testenv"
)

// The end of a state with deletionPolicy Delete: the state Secret (its
// finalizer released first), the versions kept of it and its Lease go;
// another object's state beside it stays.
func TestDeleteStateTakesWhatIsOwnAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	db, other := object("db", "uid-db", 0, ""), object("other", "uid-other", 0, "")
	k, c := keeper(t, db, other)
	k.HistoryLimit = 3
	g.Expect(k.Claim(ctx, db)).To(Succeed())
	g.Expect(k.Claim(ctx, other)).To(Succeed())

	state := stateSecret(t, c, "tfstate-default-db")
	state.Data = testenv.StateData("lin-1", 4)
	g.Expect(c.Update(ctx, state)).To(Succeed())
	g.Expect(k.KeepVersion(ctx, db, "apply of plan p", "rev")).To(Succeed())
	g.Expect(stateSecret(t, c, "tfhistory-db-1").Labels).To(HaveKeyWithValue(v1alpha1.OwnerUIDLabel, "uid-db"))

	g.Expect(k.DeleteState(ctx, db)).To(Succeed())
	for _, name := range []string{"tfstate-default-db", "tfhistory-db-1"} {
		err := c.Get(ctx, client.ObjectKey{Namespace: "team", Name: name}, &corev1.Secret{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s: %v", name, err)
	}
	err := c.Get(ctx, client.ObjectKey{Namespace: "team", Name: "lock-tfstate-default-db"}, &coordinationv1.Lease{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Lease: %v", err)
	g.Expect(stateSecret(t, c, "tfstate-default-other").Finalizers).To(ConsistOf(v1alpha1.StateFinalizer), "the other state stays guarded")
}

// A custom backend's state is the backend's: nothing kept, nothing deleted.
func TestACustomBackendKeepsNoVersion(t *testing.T) {
	g := NewWithT(t)
	obj := object("db", "uid-db", 0, "")
	obj.Spec.BackendConfig = &v1alpha1.BackendConfig{CustomConfiguration: `terraform { backend "s3" {} }`}
	kept := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "tfstate-default-db"}}
	k, c := keeper(t, obj, kept)
	g.Expect(k.KeepVersion(context.Background(), obj, "apply", "rev")).To(Succeed())
	g.Expect(k.DeleteState(context.Background(), obj)).To(Succeed())
	g.Expect(secretCount(t, c)).To(Equal(1), "the Secret of that name is not this object's to delete")
}
