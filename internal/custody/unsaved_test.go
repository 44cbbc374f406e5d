package custody

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/tfstate"
)

func stateBytes(serial int) []byte {
	return []byte(fmt.Sprintf(`{"version":4,"serial":%d,"lineage":"L","outputs":{},"resources":[]}`, serial))
}

// The state an apply could not save goes into the backend under the
// lock, and its kept copy goes; nothing kept is one read and no write;
// a lock someone holds and a backend Landform does not write keep it.
func TestPushUnsaved(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	db := object("db", "uid-db", 0, "")
	k, _ := keeper(t, db)
	kube := kubefake.NewSimpleClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: names.StateSecret(db)},
		Data:       map[string][]byte{tfstate.DataKey: tfstate.Compress(stateBytes(3))},
	})
	k.Leases, k.Secrets = kube.CoordinationV1().Leases, kube.CoreV1().Secrets

	kept, pushed, err := k.PushUnsaved(ctx, db)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kept).To(BeNil(), "nothing kept")
	g.Expect(pushed).To(BeNil())

	// Kept as a run keeps it: through the store sharing what k remembers
	// (it found none above, and looks again).
	store := k.UnsavedStates()
	_, err = store.Keep(ctx, db, "run-1", stateBytes(4), time.Now())
	g.Expect(err).NotTo(HaveOccurred())

	// Someone's lock: nothing written, the copy stays.
	leases := k.Leases("team")
	id, err := statelock.Acquire(ctx, leases, names.StateLease(db), statelock.Holder{Run: "other"}, statelock.OperationApply)
	g.Expect(err).NotTo(HaveOccurred())
	kept, _, err = k.PushUnsaved(ctx, db)
	var locked *statelock.LockedError
	g.Expect(errors.As(err, &locked)).To(BeTrue(), "%v", err)
	g.Expect(kept.Run).To(Equal("run-1"))
	g.Expect(statelock.Release(ctx, leases, names.StateLease(db), id)).To(Succeed())

	// A custom backend: a person pushes it.
	custom := db.DeepCopy()
	custom.Spec.BackendConfig = &v1alpha1.BackendConfig{CustomConfiguration: `backend "s3" {}`}
	_, _, err = k.PushUnsaved(ctx, custom)
	g.Expect(err).To(MatchError(ErrNotOurBackend))

	kept, pushed, err = k.PushUnsaved(ctx, db)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kept.Run).To(Equal("run-1"))
	g.Expect(pushed.Previous.Serial).To(BeEquivalentTo(3))
	s, err := kube.CoreV1().Secrets("team").Get(ctx, names.StateSecret(db), metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	raw, err := tfstate.Decompress(s.Data[tfstate.DataKey])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(raw).To(Equal(stateBytes(4)), "the backend holds the kept state")
	left, err := store.Stat(ctx, db)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(left).To(BeNil(), "the kept copy is gone")
	l, err := statelock.Read(ctx, leases, names.StateLease(db))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l).To(BeNil(), "the lock is released")
}

// An object's deletion done (DeleteIdentity), the keeper remembers
// nothing of it: not even that it had no unsaved state under the legacy
// name, which PushUnsaved noted (whether one is kept under the current
// name is read at every look, never remembered).
func TestDeleteIdentityForgetsTheObject(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	db := object("db", "uid-db", 0, "")
	k, _ := keeper(t, db)
	remembered := func() (n int) {
		k.done.Range(func(any, any) bool { n++; return true })
		return n
	}

	kept, _, err := k.PushUnsaved(ctx, db)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kept).To(BeNil())
	g.Expect(remembered()).To(Equal(1), "no unsaved state under the legacy name: noted")

	g.Expect(k.DeleteIdentity(ctx, db)).To(Succeed())
	g.Expect(remembered()).To(BeZero())
}
