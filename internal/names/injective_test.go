package names_test

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/keptartifact"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/planstore"
	"github.com/landform-dev/landform/internal/runlog"
	"github.com/landform-dev/landform/internal/statehistory"
	"github.com/landform-dev/landform/internal/unsavedstate"
)

// adversarialNames are object names chosen so that one's derived names
// would be another's under a careless scheme: an index suffix (-v1, -0,
// -10), dots against dashes, a kind's prefix in the name, names cut at
// the same place and 253 characters.
func adversarialNames() []string {
	out := []string{
		"hx", "hx-v1", "hx-v2", "hx-v10", "hx-1", "hx-2",
		"a", "a-0", "a-1", "a-10", "a-1-0", "a-0-0", "0", "1",
		"db.prod", "db-prod", "db.prod-0", "db-prod-0", "db.prod.v1",
		"default", "default-a", "unsaved", "unsaved-a", "unsaved-a-0",
		"history", "history-a", "tfstate-default-a", "v1", "a.v1",
		"landform-state-a", "state-a",
	}
	for _, n := range []int{47, 48, 49, 62, 63, 64, 200, 238, 239, 240, 245, 246, 247, 252, 253} {
		out = append(out, name(n, 'z'), name(n, 'y'), name(n-2, 'z')+"-1", name(n-2, 'z')+".1")
	}
	return out
}

// derivedName is one name Landform gives something of an object.
type derivedName struct {
	// resource is the API resource: names only collide within one.
	resource string
	what     string
	name     string
}

// derived lists every name Landform derives for obj in its namespace,
// chunked Secrets with enough chunk numbers to meet another object's.
func derived(obj *v1alpha1.Terraform) []derivedName {
	out := []derivedName{
		{"secrets", "state Secret", names.StateSecret(obj)},
		{"leases", "state Lease", names.StateLease(obj)},
		{"serviceaccounts", "state identity", names.StateIdentity(obj)},
		{"roles", "state identity", names.StateIdentity(obj)},
		{"rolebindings", "state identity", names.StateIdentity(obj)},
		{"secrets", "run log", runlog.SecretName(obj.Name)},
	}
	for _, i := range []int{0, 1, 2, 9, 10, 11, 100} {
		out = append(out,
			derivedName{"secrets", fmt.Sprintf("plan chunk %d", i), planstore.ChunkName(obj, i)},
			derivedName{"secrets", fmt.Sprintf("kept artifact chunk %d", i), keptartifact.ChunkName(obj, i)},
			derivedName{"secrets", fmt.Sprintf("unsaved state chunk %d", i), unsavedstate.ChunkName(obj, i)},
		)
		if i > 0 {
			out = append(out, derivedName{"secrets", fmt.Sprintf("state version %d", i), statehistory.Name(obj, i)})
		}
	}
	return out
}

// No name Landform derives for one object equals one it derives for
// another object of the namespace, nor another kind of name of the same
// object, over adversarial names.
//
// Two exceptions, both guarded by ownership rather than names
// (internal/custody records the owner's UID on the state, refuses a
// second claimant, and deletion deletes only what carries the object's
// own UID): the state Secret and Lease are the engine backend's names,
// tfstate-<workspace>-<suffix>, which objects in different workspaces
// can share ("x-y" + "a" and "x" + "y-a"), as can a
// backendConfig.secretSuffix naming another object's state; and a name
// too long for its limit is cut and hashed (names.Fit), so two names can
// meet when 32 bits of SHA-256 do: no scheme of names of at most 253
// characters can be injective over all names of 253 characters.
func TestDerivedNamesNeverCollide(t *testing.T) {
	seen := map[string]string{} // resource/name → which object's what
	for _, n := range adversarialNames() {
		obj := &v1alpha1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: n}}
		mine := map[string]bool{}
		for _, d := range derived(obj) {
			key := d.resource + "/" + d.name
			if d.resource == "roles" || d.resource == "rolebindings" || d.resource == "serviceaccounts" {
				// One identity is all three: one name in three resources.
				if mine[key] {
					continue
				}
			}
			owner := fmt.Sprintf("%s of %q", d.what, n)
			if prev, ok := seen[key]; ok {
				t.Errorf("%s %s is both the %s and the %s", d.resource, d.name, prev, owner)
				continue
			}
			seen[key] = owner
			mine[key] = true
		}
	}
	if len(seen) < 1000 {
		t.Fatalf("only %d names derived: the enumeration is broken", len(seen))
	}
}

// The names the review found colliding, named: each is now apart.
func TestTheCollisionsOnceFound(t *testing.T) {
	obj := func(n string) *v1alpha1.Terraform {
		return &v1alpha1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: n}}
	}
	if v, s := statehistory.Name(obj("hx"), 1), names.StateSecret(obj("hx-v1")); v == s {
		t.Errorf("hx's version 1 is hx-v1's state Secret %s", s)
	}
	if a, b := names.StateIdentity(obj("db.prod")), names.StateIdentity(obj("db-prod")); a == b {
		t.Errorf("db.prod and db-prod share the state identity %s", a)
	}
	ws := obj("app-0")
	ws.Spec.Workspace = "unsaved"
	if u, s := unsavedstate.ChunkName(obj("app"), 0), names.StateSecret(ws); u == s {
		t.Errorf("app's unsaved state is the state Secret %s of app-0 in workspace unsaved", s)
	}
	if !strings.HasPrefix(statehistory.Name(obj(name(253, 'z')), 7), "tfhistory-") {
		t.Errorf("a long name's version: %s", statehistory.Name(obj(name(253, 'z')), 7))
	}
}
