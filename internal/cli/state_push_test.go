package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/testenv"
	"github.com/landform-dev/landform/internal/tfstate"
	"github.com/landform-dev/landform/internal/unsavedstate"
)

// pushLineage is the lineage of the states TestStatePush pushes.
const pushLineage = "5f0c6a2e-1b3d-4e8f-9a7c-2d6e8f0a1b3c"

func stateFile(lineage string, serial int) []byte {
	return []byte(fmt.Sprintf(`{"version":4,"serial":%d,"lineage":%q,"resources":[{"type":"terraform_data","name":"this"}],"outputs":{}}`, serial, lineage))
}

// backendState is what obj's state Secret holds.
func backendState(t *testing.T, obj *v1alpha1.Terraform) string {
	t.Helper()
	var s corev1.Secret
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: obj.Namespace, Name: names.StateSecret(obj)}, &s); err != nil {
		t.Fatal(err)
	}
	raw, err := tfstate.Decompress(s.Data[tfstate.DataKey])
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// `state push` writes a kept unsaved state into the backend when a person
// decides: it refuses what `tofu state push` refuses unless --force, and
// refuses while someone holds the state lock; once written, the kept copy
// is gone and the lock free.
func TestStatePush(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "state-push")
	obj := terraform(t, ns, "app", states[objReady])

	r := run(t, "", "state", "push", "-n", ns, "app")
	if r.err != nil || !strings.Contains(r.stdout, "keeps no unsaved state") {
		t.Fatalf("with nothing kept:\n%s", r.transcript())
	}

	// The backend moved on to serial 5 since the apply whose state (4)
	// could not be saved.
	newer := stateFile(pushLineage, 5)
	if err := env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.StateSecret(obj)},
		Data:       map[string][]byte{tfstate.DataKey: tfstate.Compress(newer)},
	}); err != nil {
		t.Fatal(err)
	}
	kept := stateFile(pushLineage, 4)
	if _, err := (unsavedstate.Store{Client: env.Client}).Keep(ctx, obj, "run-0123456789abcdef", kept, now.Add(-5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	r = run(t, "", "state", "push", "-n", ns, "app")
	testenv.WantIn(t, "state push over a newer state", r.transcript(),
		"Unsaved state of state-push/app (Secret tfunsaved-app-0)", "run-0123456789abcdef", "serial 4 of lineage "+pushLineage,
		"the backend holds a newer state (serial 5)", "landform state push app --force", "delete Secret state-push/tfunsaved-app-0")
	if r.err == nil || backendState(t, obj) != string(newer) {
		t.Fatalf("wrote over a newer state:\n%s", r.transcript())
	}

	// A run holds the lock: nothing is written, even with --force.
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	leases := cs.CoordinationV1().Leases(ns)
	proc, err := statelock.CurrentProcess()
	if err != nil {
		t.Fatal(err)
	}
	lock, err := statelock.Acquire(ctx, leases, names.StateLease(obj), statelock.Holder{Run: "run-held", Process: proc}, statelock.OperationApply)
	if err != nil {
		t.Fatal(err)
	}
	r = run(t, "", "state", "push", "-n", ns, "app", "--force")
	testenv.WantIn(t, "state push while locked", r.transcript(), "the state is locked by landform-runner run run-held", "landform unlock app")
	if r.err == nil || backendState(t, obj) != string(newer) {
		t.Fatalf("wrote while the lock was held:\n%s", r.transcript())
	}
	if err := statelock.Release(ctx, leases, names.StateLease(obj), lock); err != nil {
		t.Fatal(err)
	}

	r = run(t, "", "state", "push", "-n", ns, "app", "--force")
	if r.err != nil {
		t.Fatalf("forced:\n%s", r.transcript())
	}
	golden(t, "state/push-force", normalize(r.transcript()))
	if got := backendState(t, obj); got != string(kept) {
		t.Fatalf("the backend holds %s, want the kept state", got)
	}
	err = env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: unsavedstate.SecretName(obj)}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("the kept copy outlived the push: %v", err)
	}
	released(t, obj)

	// A state file a local runner left behind.
	left := filepath.Join(t.TempDir(), "unsaved.tfstate")
	if err := os.WriteFile(left, stateFile(pushLineage, 6), 0o600); err != nil {
		t.Fatal(err)
	}
	r = run(t, "", "state", "push", "-n", ns, "app", "--file", left)
	if r.err != nil {
		t.Fatalf("--file:\n%s", r.transcript())
	}
	testenv.WantIn(t, "state push --file", r.stdout, "file unsaved.tfstate", "serial 6 of lineage "+pushLineage, "over serial 4 of lineage "+pushLineage)
	if got := backendState(t, obj); got != string(stateFile(pushLineage, 6)) {
		t.Fatalf("the backend holds %s, want the file's state", got)
	}
}
