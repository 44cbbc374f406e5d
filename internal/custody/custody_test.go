package custody

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/tfstate"
)

func object(name, uid string, age time.Duration, suffix string) *v1alpha1.Terraform {
	o := &v1alpha1.Terraform{ObjectMeta: metav1.ObjectMeta{
		Namespace: "team", Name: name, UID: types.UID(uid),
		CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-age)),
	}}
	if suffix != "" {
		o.Spec.BackendConfig = &v1alpha1.BackendConfig{SecretSuffix: suffix}
	}
	return o
}

func keeper(t *testing.T, objs ...client.Object) (*Keeper, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	return &Keeper{Client: c, Reader: c, Objects: c}, c
}

func stateSecret(t *testing.T, c client.Client, name string) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "team", Name: name}, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

func TestClaimCreatesTheStateLabelledWithItsOwner(t *testing.T) {
	g := NewWithT(t)
	db := object("db", "uid-db", 0, "")
	k, c := keeper(t, db)
	g.Expect(k.Claim(context.Background(), db)).To(Succeed())
	g.Expect(k.Claim(context.Background(), db)).To(Succeed(), "a second claim by the owner is a no-op")

	s := stateSecret(t, c, "tfstate-default-db")
	g.Expect(s.Labels).To(HaveKeyWithValue(v1alpha1.OwnerUIDLabel, "uid-db"))
	g.Expect(s.Labels).To(HaveKeyWithValue("tfstateSecretSuffix", "db"))
	g.Expect(s.Annotations).To(HaveKeyWithValue(v1alpha1.OwnerAnnotation, "db"))
	lineage := s.Annotations[tfstate.SeedAnnotation]
	g.Expect(tfstate.IsSeed(s.Data[tfstate.DataKey], lineage)).To(BeTrue(), "created holding the empty state of the lineage it names, so that the engine writes none on the first init")
	g.Expect(k.HoldsResources(context.Background(), db)).To(BeFalse(), "the empty state holds nothing to destroy")
	var l coordinationv1.Lease
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "team", Name: "lock-tfstate-default-db"}, &l)).To(Succeed())
	g.Expect(l.Labels).To(HaveKeyWithValue(v1alpha1.OwnerUIDLabel, "uid-db"))
}

func TestASecondClaimantIsRefused(t *testing.T) {
	g := NewWithT(t)
	db := object("db", "uid-db", time.Hour, "")
	preview := object("db-preview", "uid-preview", 0, "db")
	k, c := keeper(t, db, preview)
	g.Expect(k.Claim(context.Background(), db)).To(Succeed())

	err := k.Claim(context.Background(), preview)
	var owned *OwnedElsewhereError
	g.Expect(errors.As(err, &owned)).To(BeTrue(), "got %v", err)
	g.Expect(owned.Owner).To(Equal("team/db"))
	g.Expect(err.Error()).To(ContainSubstring("Secret tfstate-default-db is the state of Terraform team/db"))
	g.Expect(k.Check(context.Background(), preview)).To(MatchError(owned), "deletion sees the same owner")
	g.Expect(k.Check(context.Background(), db)).To(Succeed())
	g.Expect(stateSecret(t, c, "tfstate-default-db").Labels).To(HaveKeyWithValue(v1alpha1.OwnerUIDLabel, "uid-db"), "the owner is unchanged")
}

func TestAnUnownedStateGoesToTheOldestClaimant(t *testing.T) {
	// A state written before ownership was recorded: after the upgrade
	// the object that always had it keeps it, whichever claims first.
	legacy := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "tfstate-default-db",
		Labels: map[string]string{"tfstate": "true", "tfstateSecretSuffix": "db"}}}
	db := object("db", "uid-db", time.Hour, "")
	late := object("late", "uid-late", 0, "db")

	g := NewWithT(t)
	k, c := keeper(t, legacy, db, late)
	err := k.Claim(context.Background(), late)
	var owned *OwnedElsewhereError
	g.Expect(errors.As(err, &owned)).To(BeTrue(), "got %v", err)
	g.Expect(owned.Owner).To(Equal("team/db"))
	g.Expect(stateSecret(t, c, "tfstate-default-db").Labels).NotTo(HaveKey(v1alpha1.OwnerUIDLabel), "the late object adopts nothing")

	g.Expect(k.Claim(context.Background(), db)).To(Succeed())
	s := stateSecret(t, c, "tfstate-default-db")
	g.Expect(s.Labels).To(HaveKeyWithValue(v1alpha1.OwnerUIDLabel, "uid-db"), "adopted by its object")
	g.Expect(s.Labels).To(HaveKeyWithValue("tfstate", "true"), "the backend's labels stay")
}

func TestAStateWhoseOwnerIsGoneIsAdopted(t *testing.T) {
	// deletionPolicy Orphan kept it; the object is made again (a new UID).
	orphaned := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "tfstate-default-db",
		Labels:      map[string]string{v1alpha1.OwnerUIDLabel: "uid-old"},
		Annotations: map[string]string{v1alpha1.OwnerAnnotation: "db"}}}
	db := object("db", "uid-new", 0, "")
	g := NewWithT(t)
	k, c := keeper(t, orphaned, db)
	g.Expect(k.Claim(context.Background(), db)).To(Succeed())
	g.Expect(stateSecret(t, c, "tfstate-default-db").Labels).To(HaveKeyWithValue(v1alpha1.OwnerUIDLabel, "uid-new"))
}

func TestAKeptCopyIsNoState(t *testing.T) {
	for label, value := range map[string]string{
		"infra.landform.dev/state-history": "hx",
		"infra.landform.dev/unsaved-state": "true",
	} {
		t.Run(label, func(t *testing.T) {
			// hx's version 1 kept under the name Landform used before:
			// the state Secret of an object named hx-v1.
			kept := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "tfstate-default-hx-v1",
				Labels: map[string]string{label: value, v1alpha1.OwnerNameLabel: "hx"}}}
			hxv1 := object("hx-v1", "uid-hxv1", 0, "")
			g := NewWithT(t)
			k, c := keeper(t, kept, hxv1)
			err := k.Claim(context.Background(), hxv1)
			var owned *OwnedElsewhereError
			g.Expect(errors.As(err, &owned)).To(BeTrue(), "got %v", err)
			g.Expect(owned.KeptCopy).To(BeTrue())
			g.Expect(owned.Owner).To(Equal("team/hx"))
			g.Expect(stateSecret(t, c, "tfstate-default-hx-v1").Labels).NotTo(HaveKey(v1alpha1.OwnerUIDLabel))
		})
	}
}

// The state Secret is guarded by StateFinalizer while its owner lives
// (an adopted one too, beside finalizers of others); Release removes
// only Landform's.
func TestTheStateIsGuardedUntilReleased(t *testing.T) {
	g := NewWithT(t)
	legacy := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "tfstate-default-db",
		Finalizers: []string{"example.com/backup"}}}
	db := object("db", "uid-db", 0, "")
	k, c := keeper(t, legacy, db)
	protected, err := k.Protected(context.Background(), db)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(protected).To(BeFalse())

	g.Expect(k.Claim(context.Background(), db)).To(Succeed())
	g.Expect(stateSecret(t, c, "tfstate-default-db").Finalizers).To(ConsistOf("example.com/backup", v1alpha1.StateFinalizer))
	protected, err = k.Protected(context.Background(), db)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(protected).To(BeTrue())

	// db's state before its workspace changed, still guarded.
	db.Spec.Workspace = "blue"
	g.Expect(k.Claim(context.Background(), db)).To(Succeed())
	g.Expect(stateSecret(t, c, "tfstate-blue-db").Finalizers).To(ConsistOf(v1alpha1.StateFinalizer))

	g.Expect(k.Release(context.Background(), db)).To(Succeed())
	g.Expect(stateSecret(t, c, "tfstate-default-db").Finalizers).To(ConsistOf("example.com/backup"), "others' finalizers stay")
	g.Expect(stateSecret(t, c, "tfstate-blue-db").Finalizers).To(BeEmpty(), "every state it owned is released")

	fresh := object("fresh", "uid-fresh", 0, "")
	k, c = keeper(t, fresh)
	g.Expect(k.Claim(context.Background(), fresh)).To(Succeed())
	g.Expect(stateSecret(t, c, "tfstate-default-fresh").Finalizers).To(ConsistOf(v1alpha1.StateFinalizer))
}

func secretCount(t *testing.T, c client.Client) int {
	t.Helper()
	var list corev1.SecretList
	if err := c.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// A namespace being deleted, or gone, is terminating; a live one is not.
func TestNamespaceTerminating(t *testing.T) {
	g := NewWithT(t)
	now := metav1.Now()
	k, _ := keeper(t,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "live"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "going", DeletionTimestamp: &now, Finalizers: []string{"kubernetes"}}})
	for ns, want := range map[string]bool{"live": false, "going": true, "gone": true} {
		got, err := k.NamespaceTerminating(context.Background(), ns)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(want), ns)
	}
}

// requestCounter counts the reads and creates made through it.
type requestCounter struct {
	client.Client
	gets, creates int
}

func (c *requestCounter) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets++
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *requestCounter) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.creates++
	return c.Client.Create(ctx, obj, opts...)
}

// ran marks obj as an object whose reconcile got as far as its state.
func ran(obj *v1alpha1.Terraform) *v1alpha1.Terraform {
	obj.Status.LastAttemptedRevision = "main@sha1:0123456789abcdef"
	return obj
}

// A new object's claim creates its state without reading it first; an
// object that ran before (a restarted controller claims again) reads it
// and creates nothing. Either way a state owned by another live object is
// refused, and an orphaned one adopted.
func TestClaimReadsFirstOnlyForAnObjectThatRan(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()

	db := object("db", "uid-db", time.Hour, "")
	k, c := keeper(t, db)
	counted := &requestCounter{Client: c}
	k.Client, k.Reader = counted, counted
	g.Expect(k.Claim(ctx, db)).To(Succeed())
	g.Expect(counted.gets).To(BeZero(), "a new object's state is created, not read first")
	g.Expect(counted.creates).To(Equal(2), "the state Secret and its Lease")

	counted.gets, counted.creates = 0, 0
	g.Expect(k.Claim(ctx, ran(db.DeepCopy()))).To(Succeed())
	g.Expect(counted.gets).To(Equal(2), "an object that ran reads its Secret and Lease")
	g.Expect(counted.creates).To(BeZero())

	for _, tc := range []struct {
		name  string
		claim func(*v1alpha1.Terraform) *v1alpha1.Terraform
	}{{"new", func(o *v1alpha1.Terraform) *v1alpha1.Terraform { return o }}, {"ran", ran}} {
		second := tc.claim(object("db-copy", "uid-copy", 0, "db"))
		var owned *OwnedElsewhereError
		g.Expect(errors.As(k.Claim(ctx, second), &owned)).To(BeTrue(), tc.name)
		g.Expect(owned.Owner).To(Equal("team/db"), tc.name)
		var l coordinationv1.Lease
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "team", Name: "lock-tfstate-default-db"}, &l)).To(Succeed())
		g.Expect(l.Labels).To(HaveKeyWithValue(v1alpha1.OwnerUIDLabel, "uid-db"), "%s: the Lease is the owner's still", tc.name)

		orphaned := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "tfstate-default-app-" + tc.name,
			Labels:      map[string]string{v1alpha1.OwnerUIDLabel: "uid-old"},
			Annotations: map[string]string{v1alpha1.OwnerAnnotation: "app-" + tc.name}}}
		g.Expect(c.Create(ctx, orphaned)).To(Succeed())
		app := tc.claim(object("app-"+tc.name, "uid-app-"+tc.name, 0, ""))
		g.Expect(k.Claim(ctx, app)).To(Succeed(), tc.name)
		g.Expect(stateSecret(t, c, orphaned.Name).Labels).To(HaveKeyWithValue(v1alpha1.OwnerUIDLabel, "uid-app-"+tc.name), "%s: adopted", tc.name)
	}
}

// Namespaces are read from the cache given; one it has not seen (created
// a moment ago) from the API reader.
func TestNamespacesReadFromTheCache(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	k, _ := keeper(t,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "old", Labels: map[string]string{v1alpha1.PreviewOnlyLabel: "true"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "new", Labels: map[string]string{v1alpha1.PreviewOnlyLabel: "true"}}})
	cached, _ := keeper(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "old", Labels: map[string]string{v1alpha1.PreviewOnlyLabel: "true"}}})
	cache := &requestCounter{Client: cached.Client}
	live := &requestCounter{Client: k.Client}
	k.Namespaces, k.Reader = cache, live

	g.Expect(k.PreviewOnly(ctx, "old")).To(BeTrue())
	g.Expect(cache.gets).To(Equal(1))
	g.Expect(live.gets).To(BeZero(), "a namespace the cache holds is not read from the API server")

	g.Expect(k.PreviewOnly(ctx, "new")).To(BeTrue(), "a namespace the cache has not seen yet is read from the API server")
	g.Expect(live.gets).To(Equal(1))
	terminating, err := k.NamespaceTerminating(ctx, "gone")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(terminating).To(BeTrue())
	g.Expect(live.gets).To(Equal(2), "gone from the cache and the API server")
}
