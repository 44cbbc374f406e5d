package stateguard

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/custody"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/outcome"
)

// Deleting a namespace that holds Terraform objects: the API server
// refuses every create in it from then on (a runner Pod, a state token),
// and the namespace controller deletes its Secrets, the state among them,
// while the objects wait on their finalizer. The state Secret carries
// StateFinalizer (internal/custody), so it stays. No destroy can start
// there any more, so deletion stops, Stalled, and a person decides what
// cannot be decided for them, told exactly how: save the state and
// release it. A destroy already under way is collected first.

// releaseCheckEvery is how often a Stalled NamespaceTerminating looks
// whether a person released the state: nothing watches state Secrets.
const releaseCheckEvery = 30 * time.Second

// Verdict is what deletion does in obj's namespace.
type Verdict int

const (
	// DeleteAsUsual: the namespace is not being deleted, or the destroy
	// has run.
	DeleteAsUsual Verdict = iota
	// LetGo: the namespace is being deleted and the state is no longer
	// guarded (a person saved and released it, or there never was one):
	// nothing is destroyed, the object goes.
	LetGo
)

// InTerminatingNamespace decides deletion's course when obj's namespace is
// being deleted: as usual, let go, or a stalling NamespaceTerminating
// whose message says how to keep the resources.
func (g *Guard) InTerminatingNamespace(ctx context.Context, obj *infrav1.Terraform, destroyed bool) (Verdict, error) {
	if custody.CustomBackend(obj) {
		return DeleteAsUsual, nil
	}
	terminating, err := g.Keeper.NamespaceTerminating(ctx, obj.Namespace)
	if err != nil {
		return DeleteAsUsual, outcome.Retry(infrav1.DestroyFailedReason, "%v", err)
	}
	if !terminating {
		return DeleteAsUsual, nil
	}
	protected, err := g.Keeper.Protected(ctx, obj)
	if err != nil {
		return DeleteAsUsual, outcome.Retry(infrav1.NamespaceTerminatingReason, "%v", err)
	}
	if !protected {
		g.Events.Event(obj, "", corev1.EventTypeWarning, infrav1.NamespaceTerminatingReason,
			"namespace %s is being deleted and the state is not guarded any more (released by a person, or never written): nothing is destroyed, the resources stay", obj.Namespace)
		return LetGo, nil
	}
	switch {
	case obj.GetDeletionPolicy() == infrav1.DeletionPolicyOrphan:
		return DeleteAsUsual, outcome.StalledUntil(infrav1.NamespaceTerminatingReason, releaseCheckEvery,
			"namespace %s is being deleted, and with it Secret %s, the state of the resources deletionPolicy Orphan keeps; %s",
			obj.Namespace, names.StateSecret(obj), saveAndRelease(obj))
	case !destroyed:
		// Measured, not assumed: with local runners too the destroy
		// cannot start, as the namespace controller deletes the state's
		// Lease and identity and the API server refuses to create them
		// again (and a runner Pod, and a kept state version).
		return DeleteAsUsual, outcome.StalledUntil(infrav1.NamespaceTerminatingReason, releaseCheckEvery,
			"namespace %s is being deleted: Kubernetes refuses what a destroy needs there (a runner, the state's identity and lock), so the resources stay; the state is kept in Secret %s (finalizer %s) until you decide: %s",
			obj.Namespace, names.StateSecret(obj), infrav1.StateFinalizer, saveAndRelease(obj))
	}
	return DeleteAsUsual, nil
}

// saveAndRelease tells a person how to keep obj's state once its
// namespace is gone, and to delete Terraform objects before their
// namespace next time.
func saveAndRelease(obj *infrav1.Terraform) string {
	secret := names.StateSecret(obj)
	return fmt.Sprintf("save it with `kubectl get secret -n %[1]s %[2]s -o jsonpath='{.data.tfstate}' | base64 -d | gunzip > %[3]s.tfstate`, "+
		"then release it with `kubectl patch secret -n %[1]s %[2]s --type json -p '[{\"op\":\"remove\",\"path\":\"/metadata/finalizers\"}]'`; "+
		"the object then goes, and the saved state can be given to an object in another namespace (docs/state.md#deleting-a-namespace). "+
		"Delete Terraform objects, and wait for them, before their namespace",
		obj.Namespace, secret, obj.Name)
}
