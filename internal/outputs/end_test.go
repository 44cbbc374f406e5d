package outputs

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// Deleting the object deletes the outputs Secret it controls and leaves
// one it does not; with Orphan the Secret stays, no longer owned.
func TestEnd(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	owner := env.Terraform(t, ns, "db")
	spec := v1alpha1.WriteOutputsToSecretSpec{Name: "db-conn"}
	if err := Write(ctx, env.Client, owner, spec, map[string][]byte{"host": []byte("h")}); err != nil {
		t.Fatal(err)
	}
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "theirs"}}
	if err := env.Client.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"theirs", "missing"} {
		if err := End(ctx, env.Client, env.Client, owner, name); err != nil {
			t.Fatalf("End(%s): %v", name, err)
		}
	}
	env.Secret(t, ns, "theirs") // still there

	orphan := owner.DeepCopy()
	orphan.Spec.DeletionPolicy = v1alpha1.DeletionPolicyOrphan
	if err := End(ctx, env.Client, env.Client, orphan, "db-conn"); err != nil {
		t.Fatal(err)
	}
	if s := env.Secret(t, ns, "db-conn"); len(s.OwnerReferences) != 0 || string(s.Data["host"]) != "h" {
		t.Fatalf("Orphan: owner references %v, data %v", s.OwnerReferences, s.Data)
	}

	if err := Write(ctx, env.Client, owner, spec, map[string][]byte{"host": []byte("h")}); err != nil {
		t.Fatal(err)
	}
	if err := End(ctx, env.Client, env.Client, owner, "db-conn"); err != nil {
		t.Fatal(err)
	}
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-conn"}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("Delete: the outputs Secret is still there: %v", err)
	}
}
