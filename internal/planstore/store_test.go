package planstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/chunkstore"
	"github.com/landform-dev/landform/internal/testenv"
)

// planSecrets lists the plan Secrets of owner's namespace by name.
func planSecrets(t *testing.T, owner *v1alpha1.Terraform) map[string]corev1.Secret {
	t.Helper()
	return env.Secrets(t, owner.Namespace, func(name string) bool { return strings.HasPrefix(name, "tfplan-") })
}

// mustSave saves p as owner's plan, failing the test on an error.
func mustSave(t *testing.T, store Store, owner *v1alpha1.Terraform, p *Plan) {
	t.Helper()
	if err := store.Save(context.Background(), owner, p); err != nil {
		t.Fatal(err)
	}
}

// assertLoads checks that owner's plan loads as want.
func assertLoads(t *testing.T, store Store, owner *v1alpha1.Terraform, want *Plan) {
	t.Helper()
	got, err := store.Load(context.Background(), owner)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != want.ID || got.Revision != want.Revision || got.InputsDigest != want.InputsDigest || got.Applied != want.Applied {
		t.Errorf("metadata = %+v, want %+v", *got, *want)
	}
	for _, f := range []struct {
		name      string
		got, want []byte
	}{{"PlanFile", got.PlanFile, want.PlanFile}, {"JSONPlan", got.JSONPlan, want.JSONPlan}, {"HumanPlan", got.HumanPlan, want.HumanPlan}} {
		if !bytes.Equal(f.got, f.want) {
			t.Errorf("%s differs: got %d bytes, want %d", f.name, len(f.got), len(f.want))
		}
	}
}

func TestSaveLoadLargePlan(t *testing.T) {
	ctx := context.Background()
	owner := env.Owner(t, "big")
	store := Store{Client: env.Client}

	// Random bytes do not compress, so 5 MiB needs about ten chunks.
	want := &Plan{
		ID: "plan-abc123-0f0f", Revision: "main@sha1:abc123", InputsDigest: "sha256:inputs",
		PlanFile:  testenv.RandomBytes(t, 5<<20),
		JSONPlan:  []byte(`{"format_version":"1.2","resource_changes":[]}`),
		HumanPlan: []byte("Plan: 1 to add, 0 to change, 0 to destroy.\n"),
	}
	mustSave(t, store, owner, want)
	assertLoads(t, store, owner, want)

	secrets := planSecrets(t, owner)
	if len(secrets) < 10 {
		t.Fatalf("5 MiB plan stored in %d Secrets, want at least 10", len(secrets))
	}
	for name, s := range secrets {
		if n := len(s.Data[dataKey]); n > chunkstore.ChunkSize {
			t.Errorf("%s holds %d bytes, more than a chunk", name, n)
		}
		if s.Labels[v1alpha1.ManagedByLabel] != "landform" || s.Labels[v1alpha1.OwnerNameLabel] != "big" || s.Labels[PlanLabel] != want.ID {
			t.Errorf("%s labels = %v", name, s.Labels)
		}
		if string(s.Type) != SecretType {
			t.Errorf("%s type = %q", name, s.Type)
		}
		refs := s.OwnerReferences
		if len(refs) != 1 || !metav1.IsControlledBy(&s, owner) || refs[0].Kind != "Terraform" ||
			refs[0].APIVersion != v1alpha1.GroupVersion.String() || refs[0].BlockOwnerDeletion == nil || !*refs[0].BlockOwnerDeletion {
			t.Errorf("%s owner references = %+v, want one controller reference to Terraform %s", name, refs, owner.UID)
		}
	}
	index := secrets["tfplan-big-0"]
	for k, v := range map[string]string{annID: want.ID, annRevision: want.Revision, annInputs: want.InputsDigest,
		annChunks: fmt.Sprint(len(secrets)), annApplied: "false"} {
		if index.Annotations[k] != v {
			t.Errorf("index annotation %s = %q, want %q", k, index.Annotations[k], v)
		}
	}

	meta, err := store.LoadMeta(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	if meta.ID != want.ID || meta.Revision != want.Revision || meta.InputsDigest != want.InputsDigest || meta.Applied || meta.PlanFile != nil {
		t.Errorf("LoadMeta = %+v", meta)
	}
}

func TestShorterPlanRemovesExtraChunks(t *testing.T) {
	owner := env.Owner(t, "shrink")
	store := Store{Client: env.Client}

	mustSave(t, store, owner, &Plan{ID: "plan-a-1", PlanFile: testenv.RandomBytes(t, 3<<20)})
	if n := len(planSecrets(t, owner)); n < 6 {
		t.Fatalf("3 MiB plan in %d Secrets, want at least 6", n)
	}
	small := &Plan{ID: "plan-b-2", Revision: "r2", PlanFile: []byte("small plan")}
	mustSave(t, store, owner, small)
	names := slices.Sorted(maps.Keys(planSecrets(t, owner)))
	if !slices.Equal(names, []string{"tfplan-shrink-0"}) {
		t.Errorf("after a small plan, Secrets = %v, want only tfplan-shrink-0", names)
	}
	assertLoads(t, store, owner, small)
}

func TestTamperedOrIncompletePlanIsNotFound(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(t *testing.T, owner *v1alpha1.Terraform)
		want   string
	}{
		{"data changed", func(t *testing.T, owner *v1alpha1.Terraform) {
			env.UpdateSecret(t, owner.Namespace, "tfplan-"+owner.Name+"-2", func(s *corev1.Secret) { s.Data[dataKey][100] ^= 0xff })
		}, "sha256"},
		{"chunk missing", func(t *testing.T, owner *v1alpha1.Terraform) {
			env.DeleteSecret(t, owner.Namespace, "tfplan-"+owner.Name+"-1")
		}, "missing"},
		{"chunk from another plan", func(t *testing.T, owner *v1alpha1.Terraform) {
			env.UpdateSecret(t, owner.Namespace, "tfplan-"+owner.Name+"-1", func(s *corev1.Secret) { s.Annotations[annSHA256] = "other" })
		}, "another plan"},
		{"index count wrong", func(t *testing.T, owner *v1alpha1.Terraform) {
			env.UpdateSecret(t, owner.Namespace, "tfplan-"+owner.Name+"-0", func(s *corev1.Secret) { s.Annotations[annChunks] = "2" })
		}, "sha256"},
		{"index unreadable", func(t *testing.T, owner *v1alpha1.Terraform) {
			env.UpdateSecret(t, owner.Namespace, "tfplan-"+owner.Name+"-0", func(s *corev1.Secret) { delete(s.Annotations, annChunks) })
		}, "no valid index"},
	}
	ns := env.Namespace(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			owner := env.Terraform(t, ns, fmt.Sprintf("tamper-%d", i))
			store := Store{Client: env.Client}
			mustSave(t, store, owner, &Plan{ID: "plan-x-1", PlanFile: testenv.RandomBytes(t, 2<<20)})
			tt.tamper(t, owner)
			_, err := store.Load(ctx, owner)
			if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load = %v, want ErrNotFound saying %q", err, tt.want)
			}
			// The event about a dropped plan quotes this error.
			if tt.name != "index unreadable" && (err == nil || !strings.Contains(err.Error(), "plan-x-1")) {
				t.Errorf("Load = %v, want it to name plan plan-x-1", err)
			}
		})
	}
}

func TestNoPlan(t *testing.T) {
	ctx := context.Background()
	owner := env.Terraform(t, env.Namespace(t), "none")
	store := Store{Client: env.Client}
	if _, err := store.Load(ctx, owner); !errors.Is(err, ErrNotFound) {
		t.Errorf("Load = %v, want ErrNotFound", err)
	}
	if _, err := store.LoadMeta(ctx, owner); !errors.Is(err, ErrNotFound) {
		t.Errorf("LoadMeta = %v, want ErrNotFound", err)
	}
	if err := store.Delete(ctx, owner); err != nil {
		t.Errorf("Delete of nothing = %v", err)
	}
}

func TestAppliedFromStatus(t *testing.T) {
	ctx := context.Background()
	owner := env.Terraform(t, env.Namespace(t), "apply")
	store := Store{Client: env.Client}
	want := &Plan{ID: "plan-a-1", Revision: "r1", PlanFile: testenv.RandomBytes(t, 700<<10), HumanPlan: []byte("1 to add")}
	mustSave(t, store, owner, want)
	owner.Status.LastAppliedPlan = "plan-other-2"
	if meta, _ := store.LoadMeta(ctx, owner); meta == nil || meta.Applied {
		t.Fatalf("plan taken for applied when another was: %+v", meta)
	}
	owner.Status.LastAppliedPlan = want.ID
	want.Applied = true
	assertLoads(t, store, owner, want)

	// A new plan starts unapplied.
	next := &Plan{ID: "plan-b-2", Revision: "r2", PlanFile: []byte("next")}
	mustSave(t, store, owner, next)
	meta, err := store.LoadMeta(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	if meta.ID != "plan-b-2" || meta.Applied {
		t.Errorf("after a new Save, meta = %+v, want plan-b-2 not applied", meta)
	}

	// A plan an earlier version marked applied stays applied.
	owner.Status.LastAppliedPlan = ""
	old := &Plan{ID: "plan-c-3", Revision: "r3", PlanFile: []byte("old"), Applied: true}
	mustSave(t, store, owner, old)
	if meta, _ := store.LoadMeta(ctx, owner); meta == nil || !meta.Applied {
		t.Errorf("a plan annotated applied = %+v, want applied", meta)
	}
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	owner := env.Owner(t, "del")
	// A neighbour whose name shares a prefix must keep its plan.
	neighbour := env.Terraform(t, owner.Namespace, "del-1")
	store := Store{Client: env.Client}
	for _, o := range []*v1alpha1.Terraform{owner, neighbour} {
		mustSave(t, store, o, &Plan{ID: "plan-a-1", PlanFile: testenv.RandomBytes(t, 1<<20)})
	}
	if err := store.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	if n := len(planSecrets(t, owner)); n != 3 {
		t.Errorf("%d plan Secrets left in the namespace, want the neighbour's 3", n)
	}
	if _, err := store.Load(ctx, owner); !errors.Is(err, ErrNotFound) {
		t.Errorf("Load after Delete = %v, want ErrNotFound", err)
	}
	if _, err := store.Load(ctx, neighbour); err != nil {
		t.Errorf("neighbour's plan was damaged: %v", err)
	}
}

func TestLongOwnerName(t *testing.T) {
	ctx := context.Background()
	name := strings.Repeat("a", 250)
	owner := env.Terraform(t, env.Namespace(t), name)
	store := Store{Client: env.Client}
	want := &Plan{ID: "plan-a-1", PlanFile: testenv.RandomBytes(t, 600<<10)}
	mustSave(t, store, owner, want)
	assertLoads(t, store, owner, want)
	if err := store.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	if n := len(planSecrets(t, owner)); n != 0 {
		t.Errorf("%d Secrets left after Delete", n)
	}
}

// Saving a plan reads the previous plan's index, not a list of the
// namespace's Secrets (which grows with every object in it).
func TestSaveListsNoSecrets(t *testing.T) {
	owner := env.Owner(t, "nolist")
	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	lists := 0
	store := Store{Client: interceptor.NewClient(direct, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lists++
			return c.List(ctx, list, opts...)
		},
	})}
	mustSave(t, store, owner, &Plan{ID: "plan-a-1", PlanFile: testenv.RandomBytes(t, 3<<20)})
	small := &Plan{ID: "plan-b-2", PlanFile: []byte("small plan")}
	mustSave(t, store, owner, small)
	if lists != 0 {
		t.Errorf("saving two plans listed Secrets %d times", lists)
	}
	if names := slices.Sorted(maps.Keys(planSecrets(t, owner))); !slices.Equal(names, []string{"tfplan-nolist-0"}) {
		t.Errorf("after a small plan, Secrets = %v, want only tfplan-nolist-0", names)
	}
	assertLoads(t, store, owner, small)
}
