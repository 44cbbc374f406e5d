package stateguard

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/custody"
	"github.com/landform-dev/landform/internal/metrics"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/outcome"
	"github.com/landform-dev/landform/internal/outcome/outcometest"
	"github.com/landform-dev/landform/internal/source"
	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/tfstate"
)

// recorded are the events a Guard recorded, "Type Reason: message".
type recorded []string

func (r *recorded) Event(obj *infrav1.Terraform, revision, eventType, reason, format string, args ...any) {
	*r = append(*r, fmt.Sprintf("%s %s: %s", eventType, reason, fmt.Sprintf(format, args...)))
}

func (r *recorded) PlanEvent(obj *infrav1.Terraform, id, revision, eventType, reason, format string, args ...any) {
	r.Event(obj, revision, eventType, reason, format, args...)
}

func object(name, uid string, age time.Duration) *infrav1.Terraform {
	o := &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID("uid-" + uid),
		CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-age))}}
	o.Spec.SourceRef = infrav1.SourceReference{Kind: "GitRepository", Name: "repo"}
	return o
}

// guard is a Guard over objs in a fake API, its Leases and Secrets on a
// fake clientset.
func guard(t *testing.T, objs ...client.Object) (*Guard, *recorded, *kubefake.Clientset, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := infrav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	kube := kubefake.NewSimpleClientset()
	ev := &recorded{}
	k := &custody.Keeper{Client: c, Reader: c, Objects: c, Leases: kube.CoordinationV1().Leases, Secrets: kube.CoreV1().Secrets,
		Artifacts: source.NewFetcher(t.TempDir())}
	return &Guard{Keeper: k, Events: ev}, ev, kube, c
}

// The second object resolving to a state is refused, naming the owner;
// its deletion neither destroys nor deletes that state, and says so.
func TestASecondClaimantIsStalledAndItsDeletionKeepsTheState(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	first, second := object("db", "1", time.Hour), object("db-copy", "2", 0)
	second.Spec.BackendConfig = &infrav1.BackendConfig{SecretSuffix: names.SecretSuffix(first)}
	gd, ev, _, c := guard(t, first, second)
	g.Expect(gd.Claim(ctx, first)).To(Succeed())

	outcometest.Expect(g, gd.Claim(ctx, second), outcome.Stalled, infrav1.StateOwnedElsewhereReason, "team/db")
	owns, err := gd.Owns(ctx, second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(owns).To(BeFalse())
	g.Expect(*ev).To(ConsistOf(ContainSubstring("deletion destroys nothing and keeps Secret " + names.StateSecret(first))))

	// The owner goes, keeping its state (deletionPolicy Orphan); the
	// second, which never ran on it, is deleted next: it does not adopt
	// the state to destroy what the Orphan kept.
	g.Expect(c.Delete(ctx, first)).To(Succeed())
	owns, err = gd.Owns(ctx, second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(owns).To(BeFalse(), "a state another object left is not this one's to destroy")
	g.Expect((*ev)[len(*ev)-1]).To(And(ContainSubstring("deletion destroys nothing and keeps Secret "+names.StateSecret(first)),
		ContainSubstring("Terraform team/db left"), ContainSubstring("never ran on it")))

	// A live reconcile still adopts it (Claim), and the state is then the
	// second's own.
	g.Expect(gd.Claim(ctx, second)).To(Succeed())
	owns, err = gd.Owns(ctx, second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(owns).To(BeTrue())
}

// A lock another holder keeps waits, naming it and how to unlock; one
// whose runner Pod is gone is released, said in an event, and the object
// plans again at once.
func TestLockHeld(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	db := object("db", "1", 0)
	gd, ev, kube, _ := guard(t, db)
	leases := kube.CoordinationV1().Leases("team")

	id, err := statelock.Acquire(ctx, leases, names.StateLease(db), statelock.Holder{Run: "tofu"}, statelock.OperationApply)
	g.Expect(err).NotTo(HaveOccurred())
	err = gd.LockHeld(ctx, db, map[string]string{"id": id, "who": "alice"})
	outcometest.Expect(g, err, outcome.Waiting, infrav1.StateLockedReason, "locked by alice", "landform unlock db -n team` (with --force for a holder it cannot prove gone)")
	g.Expect(db.Status.Lock.ID).To(Equal(id))
	g.Expect(statelock.Release(ctx, leases, names.StateLease(db), id)).To(Succeed())

	gone := statelock.Holder{Run: "run-1", Pod: &statelock.PodHolder{Namespace: "team", Name: "runner-gone", UID: "x"}}
	id, err = statelock.Acquire(ctx, leases, names.StateLease(db), gone, statelock.OperationApply)
	g.Expect(err).NotTo(HaveOccurred())
	err = gd.LockHeld(ctx, db, map[string]string{"id": id})
	outcometest.Expect(g, err, outcome.Waiting, infrav1.StateLockReleasedReason, "planning again")
	g.Expect(outcome.Of(err, "").After).To(Equal(outcome.ReplanSoon))
	g.Expect(db.Status.Lock).To(BeNil())
	g.Expect(*ev).To(ConsistOf(ContainSubstring("Warning StateLockReleased: released state lock " + id)))
}

// A kept unsaved state the backend refuses waits for a person, with the
// way to decide, told once in an event; a free backend takes it.
func TestPushUnsaved(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	db := object("db", "1", 0)
	gd, ev, kube, _ := guard(t, db)
	state := func(serial int) []byte {
		return []byte(fmt.Sprintf(`{"version":4,"serial":%d,"lineage":"L","outputs":{},"resources":[{"type":"terraform_data","name":"x"}]}`, serial))
	}
	_, err := kube.CoreV1().Secrets("team").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: names.StateSecret(db)},
		Data: map[string][]byte{tfstate.DataKey: tfstate.Compress(state(9))}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gd.PushUnsaved(ctx, db)).To(Succeed(), "nothing kept")
	g.Expect(unsavedGauge(t, db)).To(Equal(0.0))

	// Kept as a run keeps it, through the store that shares what the
	// keeper remembers.
	_, err = gd.Keeper.UnsavedStates().Keep(ctx, db, "run-1", state(4), time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	err = gd.PushUnsaved(ctx, db)
	outcometest.Expect(g, err, outcome.Waiting, infrav1.StateUnsavedReason, "the state that run run-1 could not save", "landform state push db --force")
	g.Expect(*ev).To(HaveLen(1))
	g.Expect(unsavedGauge(t, db)).To(Equal(1.0))
	// A controller started since, which never saw the run, says so too.
	metrics.ForgetObject(db.Namespace, db.Name)
	g.Expect(gd.PushUnsaved(ctx, db)).NotTo(Succeed())
	g.Expect(unsavedGauge(t, db)).To(Equal(1.0), "the kept state found after a restart")

	// The backend's state is older (a person restored one): written.
	_, err = kube.CoreV1().Secrets("team").Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: names.StateSecret(db)},
		Data: map[string][]byte{tfstate.DataKey: tfstate.Compress(state(3))}}, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gd.PushUnsaved(ctx, db)).To(Succeed())
	g.Expect((*ev)[len(*ev)-1]).To(ContainSubstring("Normal StatePersisted: wrote the state that run run-1 could not save"))
	s, err := kube.CoreV1().Secrets("team").Get(ctx, names.StateSecret(db), metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tfstate.Decompress(s.Data[tfstate.DataKey])).To(Equal(state(4)), "the backend holds the kept state")
	g.Expect(unsavedGauge(t, db)).To(Equal(0.0), "written")

	// Kept again, then written by a person (`landform state push`, which
	// forgets the copy): the next look clears the gauge.
	kept, err := gd.Keeper.UnsavedStates().Keep(ctx, db, "run-2", state(6), time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	metrics.SetStateUnsaved(db.Namespace, db.Name, true)
	g.Expect(gd.Keeper.UnsavedStates().Forget(ctx, db, kept)).To(Succeed())
	g.Expect(gd.PushUnsaved(ctx, db)).To(Succeed())
	g.Expect(unsavedGauge(t, db)).To(Equal(0.0), "pushed by a person")
}

// unsavedGauge is landform_state_unsaved of obj as the metrics endpoint
// serves it; -1 without a series.
func unsavedGauge(t *testing.T, obj *infrav1.Terraform) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "landform_state_unsaved" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == obj.Namespace && labels["name"] == obj.Name {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// In a terminating namespace, a guarded state stalls deletion with the
// commands to save and release it; once released, the object goes and
// nothing is destroyed.
func TestInTerminatingNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	now := metav1.Now()
	db := object("db", "1", 0)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", DeletionTimestamp: &now, Finalizers: []string{"kubernetes"}}}
	gd, ev, _, _ := guard(t, db, ns)
	g.Expect(gd.Claim(ctx, db)).To(Succeed())

	verdict, err := gd.InTerminatingNamespace(ctx, db, false)
	g.Expect(verdict).To(Equal(DeleteAsUsual))
	outcometest.Expect(g, err, outcome.Stalled, infrav1.NamespaceTerminatingReason,
		"kubectl get secret -n team "+names.StateSecret(db), "kubectl patch secret -n team "+names.StateSecret(db))
	g.Expect(outcome.Of(err, "").After).To(BeNumerically(">", 0), "looked at again: nothing watches the state Secret")

	g.Expect(gd.Keeper.Release(ctx, db)).To(Succeed())
	verdict, err = gd.InTerminatingNamespace(ctx, db, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(verdict).To(Equal(LetGo))
	g.Expect(strings.Join(*ev, "\n")).To(ContainSubstring("nothing is destroyed, the resources stay"))
}

// A destroy whose source is gone, with no artifact kept, stalls naming
// the source and what to restore.
func TestKeptForDestroyWithoutAnArtifact(t *testing.T) {
	g := NewWithT(t)
	db := object("db", "1", 0)
	db.Status.LastAppliedRevision = "main@sha1:abc"
	gd, _, _, _ := guard(t, db)
	_, _, _, err := gd.KeptForDestroy(context.Background(), db, source.ErrSourceNotFound)
	outcometest.Expect(g, err, outcome.Stalled, infrav1.SourceNotFoundReason,
		"source GitRepository team/repo is gone", "no applied artifact was kept", "restore the source (revision main@sha1:abc)")
}
