package custody

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/statelock"
)

// A lock whose runner Pod is gone (or replaced) is released by its id; a
// lock whose Pod still runs, one held from another namespace's Pod, and
// one of a holder that is not Landform's stay, and are reported held.
func TestReleaseGoneLock(t *testing.T) {
	ctx := context.Background()
	running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "alive", UID: "uid-alive"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, tc := range []struct {
		name    string
		holder  *statelock.Holder
		release bool
		why     string
	}{
		{"runner Pod deleted", &statelock.Holder{Run: "r1", Pod: &statelock.PodHolder{Namespace: "team", Name: "gone", UID: "uid-gone"}}, true, "its runner Pod team/gone no longer exists"},
		{"runner Pod replaced", &statelock.Holder{Run: "r2", Pod: &statelock.PodHolder{Namespace: "team", Name: "alive", UID: "uid-before"}}, true, "its runner Pod team/alive"},
		{"runner Pod running", &statelock.Holder{Run: "r3", Pod: &statelock.PodHolder{Namespace: "team", Name: "alive", UID: "uid-alive"}}, false, ""},
		{"a Pod of another namespace", &statelock.Holder{Run: "r4", Pod: &statelock.PodHolder{Namespace: "other", Name: "gone", UID: "x"}}, false, ""},
		{"someone's tofu", nil, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			db := object("db", "uid-db", 0, "")
			k, _ := keeper(t, db, running.DeepCopy())
			kube := kubefake.NewSimpleClientset()
			k.Leases = kube.CoordinationV1().Leases
			leases := k.Leases("team")
			var id string
			var err error
			if tc.holder != nil {
				id, err = statelock.Acquire(ctx, leases, names.StateLease(db), *tc.holder, statelock.OperationApply)
			} else {
				// As tofu's kubernetes backend locks: no Landform holder.
				id = "tofu-1"
				_, err = leases.Create(ctx, &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Name: names.StateLease(db), Annotations: map[string]string{
						statelock.InfoAnnotation: `{"ID":"tofu-1","Who":"alice@laptop","Operation":"OperationTypeApply"}`}},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: &id},
				}, metav1.CreateOptions{})
			}
			g.Expect(err).NotTo(HaveOccurred())

			held, released, err := k.ReleaseGoneLock(ctx, db)
			g.Expect(err).NotTo(HaveOccurred())
			now, err := statelock.Read(ctx, leases, names.StateLease(db))
			g.Expect(err).NotTo(HaveOccurred())
			if tc.release {
				g.Expect(released).NotTo(BeNil())
				g.Expect(released.Info.ID).To(Equal(id))
				g.Expect(released.Why).To(ContainSubstring(tc.why))
				g.Expect(held).To(BeNil())
				g.Expect(now).To(BeNil(), "the lock is gone")
				return
			}
			g.Expect(released).To(BeNil())
			g.Expect(held).NotTo(BeNil())
			g.Expect(held.ID).To(Equal(id))
			g.Expect(now).NotTo(BeNil(), "the lock stays")
		})
	}
}

// A free state reports nothing held; a custom backend's lock is not
// read.
func TestReleaseGoneLockOfAFreeOrCustomState(t *testing.T) {
	g := NewWithT(t)
	db := object("db", "uid-db", 0, "")
	k, _ := keeper(t, db)
	k.Leases = kubefake.NewSimpleClientset().CoordinationV1().Leases
	held, released, err := k.ReleaseGoneLock(context.Background(), db)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(held).To(BeNil())
	g.Expect(released).To(BeNil())

	custom := object("c", "uid-c", 0, "")
	custom.Spec.BackendConfig = &v1alpha1.BackendConfig{CustomConfiguration: `backend "local" {}`}
	k.Leases = nil // would panic if read
	held, released, err = k.ReleaseGoneLock(context.Background(), custom)
	g.Expect(err).To(MatchError(ErrNotOurBackend))
	g.Expect(held).To(BeNil())
	g.Expect(released).To(BeNil())
}
