package outputs

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

func dataStrings(s *corev1.Secret) map[string]string {
	out := map[string]string{}
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out
}

func TestWriteCreatesAndUpdates(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	owner := env.Terraform(t, ns, "db")
	spec := v1alpha1.WriteOutputsToSecretSpec{
		Name:        "db-conn",
		Labels:      map[string]string{"team": "db", v1alpha1.ManagedByLabel: "someone-else"},
		Annotations: map[string]string{"reloader.stakater.com/match": "true"},
	}
	if err := Write(ctx, env.Client, owner, spec, map[string][]byte{"host": []byte("h1"), "port": []byte("5432")}); err != nil {
		t.Fatal(err)
	}
	s := env.Secret(t, ns, "db-conn")
	if d := cmp.Diff(map[string]string{"host": "h1", "port": "5432"}, dataStrings(s)); d != "" {
		t.Errorf("data after create (-want +got):\n%s", d)
	}
	wantLabels := map[string]string{"team": "db", v1alpha1.ManagedByLabel: "landform", v1alpha1.OwnerNameLabel: "db"}
	if d := cmp.Diff(wantLabels, s.Labels); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	if s.Annotations["reloader.stakater.com/match"] != "true" {
		t.Errorf("annotations = %v", s.Annotations)
	}
	if s.Type != corev1.SecretTypeOpaque {
		t.Errorf("type = %q", s.Type)
	}
	if !metav1.IsControlledBy(s, owner) || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Terraform" {
		t.Errorf("owner references = %+v, want one controller reference to %s", s.OwnerReferences, owner.UID)
	}

	// Someone else adds a label; the next write keeps it.
	s.Labels["added-by-user"] = "yes"
	if err := env.Client.Update(ctx, s); err != nil {
		t.Fatal(err)
	}

	// Drop "port" and the team label, change host, add user.
	spec.Labels = nil
	if err := Write(ctx, env.Client, owner, spec, map[string][]byte{"host": []byte("h2"), "user": []byte("admin")}); err != nil {
		t.Fatal(err)
	}
	s = env.Secret(t, ns, "db-conn")
	if d := cmp.Diff(map[string]string{"host": "h2", "user": "admin"}, dataStrings(s)); d != "" {
		t.Errorf("data after update (-want +got):\n%s", d)
	}
	wantLabels = map[string]string{"added-by-user": "yes", v1alpha1.ManagedByLabel: "landform", v1alpha1.OwnerNameLabel: "db"}
	if d := cmp.Diff(wantLabels, s.Labels); d != "" {
		t.Errorf("labels after update (-want +got):\n%s", d)
	}

	// No outputs selected any more: the Secret stays, empty.
	if err := Write(ctx, env.Client, owner, spec, map[string][]byte{}); err != nil {
		t.Fatal(err)
	}
	if s := env.Secret(t, ns, "db-conn"); len(s.Data) != 0 {
		t.Errorf("data after writing nothing = %v, want empty", dataStrings(s))
	}
}

func TestWriteRefusesForeignSecret(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	owner := env.Terraform(t, ns, "db")
	other := env.Terraform(t, ns, "other")

	tests := []struct {
		name   string
		secret *corev1.Secret
	}{
		{"unowned", &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hand-made", Labels: map[string]string{"mine": "yes"}},
			Data:       map[string][]byte{"password": []byte("keep-me")},
		}},
		{"owned by another Terraform", &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "others", OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.GroupVersion.String(), Kind: "Terraform", Name: other.Name, UID: other.UID, Controller: new(true),
			}}},
			Data: map[string][]byte{"url": []byte("theirs")},
		}},
		{"owner reference that is not a controller", &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "weak", OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.GroupVersion.String(), Kind: "Terraform", Name: owner.Name, UID: owner.UID,
			}}},
			Data: map[string][]byte{"x": []byte("y")},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := env.Client.Create(ctx, tt.secret); err != nil {
				t.Fatal(err)
			}
			before := env.Secret(t, ns, tt.secret.Name)
			err := Write(ctx, env.Client, owner, v1alpha1.WriteOutputsToSecretSpec{Name: tt.secret.Name},
				map[string][]byte{"host": []byte("h")})
			if !errors.Is(err, ErrNotOwned) {
				t.Fatalf("got %v, want ErrNotOwned", err)
			}
			for _, w := range []string{ns + "/" + tt.secret.Name, "writeOutputsToSecret.name"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			after := env.Secret(t, ns, tt.secret.Name)
			if after.ResourceVersion != before.ResourceVersion {
				t.Errorf("foreign Secret was modified: resourceVersion %s → %s", before.ResourceVersion, after.ResourceVersion)
			}
			if d := cmp.Diff(dataStrings(before), dataStrings(after)); d != "" {
				t.Errorf("foreign Secret's data changed (-before +after):\n%s", d)
			}
		})
	}
}

// A Secret handed over from tofu-controller (its owner reference dropped,
// Landform's labels added, docs/migrating-from-tofu-controller.md step 3)
// keeps the <output>__type keys tofu-controller wrote: server-side apply
// removes only keys Landform itself wrote, which the migration guide says.
func TestWriteKeepsKeysAnotherWriterLeft(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	owner := env.Terraform(t, ns, "database")
	handed := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "database-outputs", Labels: map[string]string{
			v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue, v1alpha1.OwnerNameLabel: owner.Name,
		}},
		Data: map[string][]byte{"host": []byte("db.internal"), "port": []byte("5432\n"), "port__type": []byte(`"number"`)},
	}
	if err := env.Client.Create(ctx, handed, client.FieldOwner("tf-controller")); err != nil {
		t.Fatal(err)
	}
	if err := Write(ctx, env.Client, owner, v1alpha1.WriteOutputsToSecretSpec{Name: handed.Name},
		map[string][]byte{"host": []byte("db.internal"), "port": []byte("5432")}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"host": "db.internal", "port": "5432", "port__type": `"number"`}
	if d := cmp.Diff(want, dataStrings(env.Secret(t, ns, handed.Name))); d != "" {
		t.Errorf("data after Landform's first write (-want +got):\n%s", d)
	}

	// Once removed by hand, as the guide says, it stays gone.
	patch := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/data/port__type"}]`))
	if err := env.Client.Patch(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: handed.Name}}, patch); err != nil {
		t.Fatal(err)
	}
	if err := Write(ctx, env.Client, owner, v1alpha1.WriteOutputsToSecretSpec{Name: handed.Name},
		map[string][]byte{"host": []byte("db.internal"), "port": []byte("5433")}); err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"host": "db.internal", "port": "5433"}
	if d := cmp.Diff(want, dataStrings(env.Secret(t, ns, handed.Name))); d != "" {
		t.Errorf("data after the __type key's removal and another write (-want +got):\n%s", d)
	}
}
