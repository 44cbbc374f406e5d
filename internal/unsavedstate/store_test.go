package unsavedstate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"

	"github.com/landform-dev/landform/internal/chunkstore"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/testenv"
	"github.com/landform-dev/landform/internal/tfstate"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func stateFile(lineage string, serial int) []byte {
	return []byte(fmt.Sprintf(`{"version":4,"serial":%d,"lineage":%q,"resources":[{"name":"this"}],"outputs":{}}`, serial, lineage))
}

// backendIn is the kubernetes backend's Secrets and Leases of namespace ns.
func backendIn(t *testing.T, ns string) Backend {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return Backend{Secrets: cs.CoreV1().Secrets(ns), Leases: cs.CoordinationV1().Leases(ns)}
}

// A kept state is written into the backend's state Secret under the state
// lock, and forgotten then; one the backend refuses, or one behind a lock
// held by someone else, stays kept.
func TestPushKeptState(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	owner := env.Terraform(t, ns, "app")
	backend := backendIn(t, ns)
	stateSecret := names.StateSecret(owner)
	if _, err := backend.Secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: stateSecret}, Data: map[string][]byte{tfstate.DataKey: tfstate.Compress(stateFile("L", 3))}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	proc, err := statelock.CurrentProcess()
	if err != nil {
		t.Fatal(err)
	}
	me := statelock.Holder{Tool: "landform state push", Process: proc}
	store := Store{Client: env.Client}

	if pushed, err := store.Push(ctx, owner, backend, me, false); pushed != nil || err != nil {
		t.Fatalf("push with nothing kept: %+v, %v", pushed, err)
	}
	if _, err := store.Keep(ctx, owner, "run-1", stateFile("L", 2), time.Now()); err != nil {
		t.Fatal(err)
	}
	st, err := store.Stat(ctx, owner)
	if err != nil || st == nil || st.Run != "run-1" || st.Identity.Serial != 2 || st.Identity.Lineage != "L" {
		t.Fatalf("kept: %+v, %v", st, err)
	}
	if _, err := store.Push(ctx, owner, backend, me, false); !tfstate.IsRefused(err) {
		t.Fatalf("pushing an older state: %v, want refused", err)
	}
	if st, _ := store.Stat(ctx, owner); st == nil {
		t.Fatal("a refused state was forgotten")
	}

	next := stateFile("L", 4)
	if _, err := store.Keep(ctx, owner, "run-2", next, time.Now()); err != nil {
		t.Fatal(err)
	}
	lockID, err := statelock.Acquire(ctx, backend.Leases, statelock.LeaseName(stateSecret), statelock.Holder{Run: "run-3", Process: proc}, statelock.OperationPlan)
	if err != nil {
		t.Fatal(err)
	}
	var locked *statelock.LockedError
	if _, err := store.Push(ctx, owner, backend, me, false); !errors.As(err, &locked) || locked.Info.ID != lockID {
		t.Fatalf("pushing while run-3 holds the lock: %v", err)
	}
	if err := statelock.Release(ctx, backend.Leases, statelock.LeaseName(stateSecret), lockID); err != nil {
		t.Fatal(err)
	}
	pushed, err := store.Push(ctx, owner, backend, me, false)
	if err != nil || pushed == nil || !pushed.Written || pushed.Run != "run-2" || pushed.Previous.Serial != 3 {
		t.Fatalf("push: %+v, %v", pushed, err)
	}
	s, err := backend.Secrets.Get(ctx, stateSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if raw, err := tfstate.Decompress(s.Data[tfstate.DataKey]); err != nil || string(raw) != string(next) {
		t.Fatalf("the state Secret holds %q (%v)", raw, err)
	}
	if st, err := store.Stat(ctx, owner); st != nil || err != nil {
		t.Fatalf("the written state is still kept: %+v, %v", st, err)
	}
	if info, err := statelock.Read(ctx, backend.Leases, statelock.LeaseName(stateSecret)); info != nil || err != nil {
		t.Fatalf("the lock outlived the push: %+v, %v", info, err)
	}
}

// A state kept for one state Secret is never written into another: the
// object's workspace changed since, and a new workspace's seeded state
// would take any lineage. It stays kept, even with force, and the error
// says where it belongs.
func TestPushKeptStateOfAnotherWorkspace(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	owner := env.Terraform(t, ns, "app")
	backend := backendIn(t, ns)
	store := Store{Client: env.Client}
	if _, err := store.Keep(ctx, owner, "run-1", stateFile("L", 2), time.Now()); err != nil {
		t.Fatal(err)
	}
	kept := names.StateSecret(owner)
	owner.Spec.Workspace = "other"
	now := names.StateSecret(owner)
	if _, err := backend.Secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: now}, Data: map[string][]byte{tfstate.DataKey: tfstate.Compress(stateFile("M", 1))}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, force := range []bool{false, true} {
		var elsewhere *ElsewhereError
		_, err := store.Push(ctx, owner, backend, statelock.Holder{Run: "test"}, force)
		if !errors.As(err, &elsewhere) || elsewhere.Of != kept || elsewhere.Now != now {
			t.Fatalf("force %v: %v, want the state of %s refused for %s", force, err, kept, now)
		}
		for _, w := range []string{"Secret " + kept, "now uses " + now, "spec.workspace"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q does not say %q", err, w)
			}
		}
	}
	if st, err := store.Stat(ctx, owner); err != nil || st == nil || st.Of != kept {
		t.Fatalf("still kept, of %s: %+v, %v", kept, st, err)
	}
	s, err := backend.Secrets.Get(ctx, now, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := tfstate.Decompress(s.Data[tfstate.DataKey]); string(raw) != string(stateFile("M", 1)) {
		t.Errorf("the other workspace's state was written: %s", raw)
	}
}

// An unsaved state kept under the name Landform used before
// (tfstate-unsaved-<name>-<i>, which the kubernetes backend also gives the
// state of an object in a workspace "unsaved…") is still found, pushed and
// forgotten after an upgrade; a new one is kept as tfunsaved-<name>-<i>
// and replaces it. A state Secret under the old name is not the object's.
func TestUnsavedStateKeptUnderItsOldName(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	owner := env.Terraform(t, ns, "app")
	store := Store{Client: env.Client}
	legacy := chunkstore.Store{Client: env.Client, Layout: legacyLayout}
	if _, err := legacy.Write(ctx, owner, chunkstore.Blob{Data: stateFile("L", 2), Labels: map[string]string{Label: "true"}}); err != nil {
		t.Fatal(err)
	}
	st, err := store.Read(ctx, owner)
	if err != nil || st == nil || string(st.Data) != string(stateFile("L", 2)) {
		t.Fatalf("the state kept under the old name: %+v, %v", st, err)
	}
	if SecretName(owner) != "tfunsaved-app-0" {
		t.Errorf("SecretName = %q", SecretName(owner))
	}
	if _, err := store.Keep(ctx, owner, "run-2", stateFile("L", 3), time.Now()); err != nil {
		t.Fatal(err)
	}
	var old corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tfstate-unsaved-app-0"}, &old); !apierrors.IsNotFound(err) {
		t.Errorf("the one kept under the old name stays: %v", err)
	}
	st, err = store.Read(ctx, owner)
	if err != nil || st == nil || st.Identity.Serial != 3 {
		t.Fatalf("the newer state: %+v, %v", st, err)
	}
	if err := store.Forget(ctx, owner, st.Digest); err != nil {
		t.Fatal(err)
	}

	// Object app-0 in workspace "unsaved" has this state Secret.
	state := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tfstate-unsaved-app-0"}, Data: map[string][]byte{tfstate.DataKey: tfstate.Compress(stateFile("M", 7))}}
	if err := env.Client.Create(ctx, state); err != nil {
		t.Fatal(err)
	}
	if st, err := store.Stat(ctx, owner); st != nil || err != nil {
		t.Fatalf("another object's state taken for app's unsaved state: %+v, %v", st, err)
	}
	if _, err := store.Keep(ctx, owner, "run-3", stateFile("L", 4), time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(state), state); err != nil {
		t.Fatalf("another object's state deleted: %v", err)
	}
}

// With NoLegacy, a state kept under the old name is still found at the
// first look; once an object has none there, later looks read only the
// current name (nothing writes the old one any more). The current name is
// read at every look: a state kept by another process, the CLI's
// `state push --file`, is found at the next one. ObjectGone drops the
// object from the map.
func TestNoLegacyLooksOnce(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	var seen sync.Map
	counted := &secretReadCounter{Client: env.Client}
	store := Store{Client: counted, NoLegacy: &seen}

	kept := env.Terraform(t, ns, "kept")
	legacy := chunkstore.Store{Client: env.Client, Layout: legacyLayout}
	if _, err := legacy.Write(ctx, kept, chunkstore.Blob{Data: stateFile("L", 2), Labels: map[string]string{Label: "true"}}); err != nil {
		t.Fatal(err)
	}
	if st, err := store.Read(ctx, kept); err != nil || st == nil || string(st.Data) != string(stateFile("L", 2)) {
		t.Fatalf("the state kept under the old name: %+v, %v", st, err)
	}

	none := env.Terraform(t, ns, "none")
	for look := 1; look <= 3; look++ {
		if st, err := store.Stat(ctx, none); st != nil || err != nil {
			t.Fatalf("look %d: %+v, %v; want nothing kept", look, st, err)
		}
	}
	if n := counted.reads["tfstate-unsaved-none-0"]; n != 1 {
		t.Errorf("the old name read %d times in 3 looks, want 1", n)
	}
	if n := counted.reads["tfunsaved-none-0"]; n != 3 {
		t.Errorf("the current name read %d times in 3 looks, want 3", n)
	}

	// The CLI keeps one, through a Store of its own.
	cli := Store{Client: env.Client}
	if _, err := cli.Keep(ctx, none, "file unsaved.tfstate", stateFile("L", 7), time.Now()); err != nil {
		t.Fatal(err)
	}
	if st, err := store.Stat(ctx, none); err != nil || st == nil || st.Run != "file unsaved.tfstate" {
		t.Fatalf("after the CLI kept one: %+v, %v; want it found", st, err)
	}
	if err := store.Forget(ctx, none, mustStat(t, store, none).Digest); err != nil {
		t.Fatal(err)
	}

	store.ObjectGone(none)
	if _, held := seen.Load(noLegacyKey(none)); held {
		t.Error("a forgotten object is still remembered")
	}
	if _, err := store.Stat(ctx, none); err != nil {
		t.Fatal(err)
	}
	if n := counted.reads["tfstate-unsaved-none-0"]; n != 2 {
		t.Errorf("the old name read %d times after ObjectGone, want 2 (looked at again)", n)
	}
}

func mustStat(t *testing.T, s Store, owner *v1alpha1.Terraform) *State {
	t.Helper()
	st, err := s.Stat(context.Background(), owner)
	if err != nil || st == nil {
		t.Fatalf("Stat: %+v, %v", st, err)
	}
	return st
}

// secretReadCounter counts the reads of each Secret through it.
type secretReadCounter struct {
	client.Client
	mu    sync.Mutex
	reads map[string]int
}

func (c *secretReadCounter) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.mu.Lock()
	if c.reads == nil {
		c.reads = map[string]int{}
	}
	c.reads[key.Name]++
	c.mu.Unlock()
	return c.Client.Get(ctx, key, obj, opts...)
}
