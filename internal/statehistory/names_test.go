package statehistory

import (
	"context"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/owned"
)

// legacyVersion writes version n of obj's state as Landform kept it before
// versions had names of their own: <state Secret>-v<n>, no owner UID.
func legacyVersion(t *testing.T, obj *v1alpha1.Terraform, n, serial int) *corev1.Secret {
	t.Helper()
	data := stateData(serial)
	l := owned.Labels(obj)
	l[Label] = names.Label(obj.Name)
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: names.StateSecret(obj) + "-v" + strconv.Itoa(n), Labels: l,
			Annotations: map[string]string{annIndex: strconv.Itoa(n), annDigest: digestOf(data), annSerial: strconv.Itoa(serial), annLineage: "lin-1"}},
		Data: data,
	}
	if err := env.Client.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

func secretNames(t *testing.T, ns string) []string {
	t.Helper()
	var list corev1.SecretList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		out = append(out, s.Name)
	}
	return out
}

// Object hx kept versions under the names Landform once gave them,
// tfstate-default-hx-v<n>: the state Secrets of objects named hx-v<n>.
// The next apply moves them to tfhistory-hx-<n>, byte for byte, and the
// old names are free; a version another object already took for its
// state is let go, not moved and never pruned.
func TestLegacyVersionsMoveToNamesOfTheirOwn(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	hx := env.Terraform(t, ns, "hx")
	legacyVersion(t, hx, 1, 1)
	taken := legacyVersion(t, hx, 2, 2)
	// Object hx-v2 wrote its own state into the Secret it found there.
	taken.Data = stateData(50)
	g.Expect(env.Client.Update(ctx, taken)).To(Succeed())

	state := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.StateSecret(hx)}, Data: stateData(3)}
	g.Expect(env.Client.Create(ctx, state)).To(Succeed())
	store := Store{Client: env.Client, Limit: 2}
	v, err := store.Keep(ctx, hx, "apply", "rev")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Secret).To(Equal("tfhistory-hx-2"), "numbered after the versions it moved")
	g.Expect(v.Index).To(Equal(2))

	all := secretNames(t, ns)
	g.Expect(all).To(ContainElements("tfhistory-hx-1", "tfhistory-hx-2", "tfstate-default-hx-v2"))
	g.Expect(all).NotTo(ContainElement("tfstate-default-hx-v1"), "moved away: hx-v1 may have that name for its state")

	moved := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tfhistory-hx-1"}, moved)).To(Succeed())
	g.Expect(moved.Data).To(Equal(stateData(1)), "moved byte for byte")
	g.Expect(moved.Labels).To(HaveKeyWithValue(v1alpha1.OwnerUIDLabel, string(hx.UID)))

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(taken), taken)).To(Succeed())
	g.Expect(taken.Data).To(Equal(stateData(50)), "hx-v2's state is untouched")
	g.Expect(taken.Labels).NotTo(HaveKey(Label), "and no longer a version of hx's")

	g.Expect(store.DeleteAll(ctx, hx)).To(Succeed())
	g.Expect(secretNames(t, ns)).To(ConsistOf("tfstate-default-hx", "tfstate-default-hx-v2"), "hx's versions went, hx-v2's state stayed")
}

// Pruning and DeleteAll delete only versions labelled with the object's
// UID; `landform state restore` prunes to the limit the controller
// recorded on its versions.
func TestPruneOnlyWhatIsOwnAndAtTheRecordedDepth(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	db := env.Terraform(t, ns, "db")
	state := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.StateSecret(db)}, Data: stateData(1)}
	g.Expect(env.Client.Create(ctx, state)).To(Succeed())
	controller := Store{Client: env.Client, Limit: 5}
	for serial := 1; serial <= 4; serial++ {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(state), state)).To(Succeed())
		state.Data = stateData(serial)
		g.Expect(env.Client.Update(ctx, state)).To(Succeed())
		_, err := controller.Keep(ctx, db, "apply", "rev")
		g.Expect(err).NotTo(HaveOccurred())
	}
	versions, err := List(ctx, env.Client, db)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(versions).To(HaveLen(4))
	g.Expect(RecordedLimit(versions)).To(Equal(5), "the controller's --state-history, read by the CLI")
	g.Expect(RecordedLimit(nil)).To(Equal(1), "none recorded: prune nothing")

	// The CLI's restore keeps the current state: five versions, none pruned
	// (a store with the default limit of 3 would have dropped two).
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(state), state)).To(Succeed())
	state.Data = stateData(5)
	g.Expect(env.Client.Update(ctx, state)).To(Succeed())
	_, err = Store{Client: env.Client, Limit: RecordedLimit(versions)}.Keep(ctx, db, "restore", "")
	g.Expect(err).NotTo(HaveOccurred())
	versions, err = List(ctx, env.Client, db)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(versions).To(HaveLen(5))

	// A Secret that merely carries db's name label is not db's to delete.
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tfhistory-db-9",
		Labels:      map[string]string{Label: "db", v1alpha1.OwnerUIDLabel: "someone-else"},
		Annotations: map[string]string{annIndex: "9", annDigest: digestOf(stateData(9))}}, Data: stateData(9)}
	g.Expect(env.Client.Create(ctx, foreign)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), foreign)).To(Succeed())
	foreign.Data = stateData(10) // no longer what its annotation says: not adoptable
	g.Expect(env.Client.Update(ctx, foreign)).To(Succeed())
	g.Expect(Store{Client: env.Client, Limit: 1}.DeleteAll(ctx, db)).To(Succeed())
	g.Expect(secretNames(t, ns)).To(ConsistOf("tfstate-default-db", "tfhistory-db-9"))
}
