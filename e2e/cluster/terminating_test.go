package cluster

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/tfstate"
)

// namespaceDeletedFirst: a tenant deletes the namespace of an applied
// object before the object (the real namespace controller of
// kube-controller-manager, a runner Pod that cannot start there any
// more). Nothing is destroyed and the state is not lost: the object is
// Stalled with NamespaceTerminating and the commands to save and release
// its state; the state Secret outlives the sweep and holds the resource.
// Saved and released as the message says, the object and the namespace
// go.
func (e *env) namespaceDeletedFirst(t *testing.T) {
	ctx := context.Background()
	const ns = "e2e-tenant-d"
	e.tenantNamespace(t, ns, true)
	e.gitRepositoryIn(t, ns, "tenancy", map[string]string{"m/main.tf": tenancyModule})
	tf := tenantObject(ns, "swept", "")
	if err := e.client.Create(ctx, tf); err != nil {
		t.Fatal(err)
	}
	secret := names.StateSecret(tf)
	stateKey := keyOf(ns, secret)
	// Runs before tenantNamespace's cleanup: a failed test must not leave
	// the namespace hanging on the state's finalizer.
	t.Cleanup(func() { e.releaseState(t, stateKey, false) })
	e.waitForTerraform(t, tf, "Ready", readyTrue)

	if err := e.client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	cur := e.waitForTerraform(t, tf, "Stalled NamespaceTerminating", func(tf *infrav1.Terraform) bool {
		c := ready(tf)
		return c != nil && c.Reason == infrav1.NamespaceTerminatingReason
	})
	msg := ready(cur).Message
	for _, say := range []string{"kubectl get secret -n " + ns + " " + secret, "kubectl patch secret -n " + ns + " " + secret} {
		if !strings.Contains(msg, say) {
			t.Errorf("the message %q does not say %q", msg, say)
		}
	}

	// The namespace controller asked for the state Secret's deletion and
	// could not finish it: the namespace waits, the state is whole.
	var state corev1.Secret
	if err := e.poll(ctx, "the state Secret asked to go", func() (bool, string, error) {
		if err := e.client.Get(ctx, stateKey, &state); err != nil {
			return false, "", err
		}
		return state.DeletionTimestamp != nil, "no deletionTimestamp yet", nil
	}); err != nil {
		t.Fatal(err)
	}
	raw, err := tfstate.Decompress(state.Data[tfstate.DataKey])
	if err != nil {
		t.Fatalf("the state to save: %v", err)
	}
	if !strings.Contains(string(raw), `"terraform_data"`) || !strings.Contains(string(raw), ns) {
		t.Errorf("the state to save does not hold the tenant's terraform_data:\n%s", raw)
	}
	var nsObj corev1.Namespace
	if err := e.client.Get(ctx, keyOf("", ns), &nsObj); err != nil || nsObj.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("the namespace should wait for the state (Terminating): %v, phase %q", err, nsObj.Status.Phase)
	}

	// Saved (above); now released, as the message says.
	e.releaseState(t, stateKey, true)
	e.waitGone(t, &nsObj)
}

// releaseState removes the finalizers of the state Secret at key with
// the JSON patch of the NamespaceTerminating message when asDocumented,
// else (a cleanup, the Secret maybe gone or released) with a merge patch.
func (e *env) releaseState(t *testing.T, key client.ObjectKey, asDocumented bool) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	if asDocumented {
		patch = client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`))
	}
	err := e.client.Patch(context.Background(), s, patch)
	if err != nil && (asDocumented || !apierrors.IsNotFound(err)) {
		t.Errorf("releasing the state Secret %s: %v", key, err)
	}
}
