package statehistory

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/testenv"
	"github.com/landform-dev/landform/internal/tfstate"
)

func stateData(serial int) map[string][]byte { return testenv.StateData("lin-1", serial) }

// Three applies keep three versions (the oldest beyond the limit goes), an
// unchanged state is not kept twice, restore brings the chosen one back
// and keeps what it replaced, and a held lock refuses the restore.
func TestKeepListRestore(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	obj := env.Terraform(t, ns, "app")
	store := Store{Client: env.Client}
	state := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.StateSecret(obj)}}

	v, err := store.Keep(ctx, obj, "apply", "main@sha1:0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(BeNil(), "no state yet: nothing kept")

	// The state a new workspace starts with holds nothing worth keeping.
	empty := `{"version":4,"serial":0,"lineage":"lin-1","outputs":{},"resources":[]}`
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: state.ObjectMeta, Data: map[string][]byte{tfstate.DataKey: tfstate.Compress([]byte(empty))}})).To(Succeed())
	v, err = store.Keep(ctx, obj, "apply", "main@sha1:0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(BeNil(), "an empty state is not kept")

	for serial := 1; serial <= 4; serial++ {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(state), state)).To(Succeed())
		state.Data = stateData(serial)
		g.Expect(env.Client.Update(ctx, state)).To(Succeed())
		v, err := store.Keep(ctx, obj, fmt.Sprintf("apply %d", serial), "rev")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(v.Serial).To(BeEquivalentTo(serial))
		g.Expect(v.Lineage).To(Equal("lin-1"))
	}
	again, err := store.Keep(ctx, obj, "apply again", "rev")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Index).To(Equal(4), "the same state is not kept twice")

	versions, err := List(ctx, env.Client, obj)
	g.Expect(err).NotTo(HaveOccurred())
	var serials []int64
	for _, v := range versions {
		serials = append(serials, v.Serial)
	}
	g.Expect(serials).To(Equal([]int64{4, 3, 2}), "the last three, newest first")

	leases := kubernetes.NewForConfigOrDie(env.Config).CoordinationV1().Leases(ns)
	lease := names.StateLease(obj)
	id, err := statelock.Acquire(ctx, leases, lease, statelock.Holder{Run: "run-1"}, "OperationTypeApply")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = store.Restore(ctx, leases, obj, versions[2], "alice")
	g.Expect(statelock.IsLocked(err)).To(BeTrue(), "refused while a run holds the lock: %v", err)
	g.Expect(statelock.Release(ctx, leases, lease, id)).To(Succeed())

	kept, err := store.Restore(ctx, leases, obj, versions[2], "alice")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kept.Index).To(Equal(4), "the state it replaced was kept already")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(state), state)).To(Succeed())
	g.Expect(state.Data).To(Equal(stateData(2)), "serial 2 is back, byte for byte")
	info, err := statelock.Read(ctx, leases, lease)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info).To(BeNil(), "the restore released its lock")

	// A version whose bytes changed since is refused.
	tampered := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: versions[1].Secret}, tampered)).To(Succeed())
	tampered.Data = stateData(99)
	g.Expect(env.Client.Update(ctx, tampered)).To(Succeed())
	_, err = store.Restore(ctx, leases, obj, versions[1], "alice")
	g.Expect(err).To(MatchError(ContainSubstring("does not hold what was kept")))

	g.Expect(store.DeleteAll(ctx, obj)).To(Succeed())
	versions, err = List(ctx, env.Client, obj)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(versions).To(BeEmpty())
}

// An encrypted state is kept byte for byte; its serial is unknown.
func TestEncryptedStateIsKeptAsIs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	obj := env.Terraform(t, ns, "enc")
	data := map[string][]byte{tfstate.DataKey: tfstate.Compress([]byte(`{"encrypted_data":"c2VjcmV0","encryption_version":"v0","meta":{}}`))}
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.StateSecret(obj)}, Data: data})).To(Succeed())
	v, err := Store{Client: env.Client}.Keep(ctx, obj, "apply", "rev")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Serial).To(BeEquivalentTo(-1))
	got, err := Data(ctx, env.Client, obj, *v)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(data))
}
