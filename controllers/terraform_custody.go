package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/custody"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/outcome"
	"github.com/landform-dev/landform/internal/runs"
)

// stateGuard turns what the state's custody (internal/custody: who owns
// the state, its lock, the state an apply could not save, the artifact
// kept for a destroy) finds into the object's outcomes, conditions,
// events and metrics: here who owns the state and what a terminating
// namespace means for it, and in terraform_lock.go, terraform_unsaved.go
// and terraform_keptartifact.go the rest.
type stateGuard struct {
	keeper *custody.Keeper
	report *reporter
	runs   *runs.Tracker
}

// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;create;patch;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;create;patch;delete

// claimState makes obj the owner of its state before anything runs: a
// state another live object owns stalls with StateOwnedElsewhere, naming
// the owner.
func (g *stateGuard) claimState(ctx context.Context, obj *infrav1.Terraform) error {
	if err := g.keeper.ClaimOnce(ctx, obj); err != nil {
		return stateCustodyError(err)
	}
	return nil
}

// ownsState reports whether obj owns its state, so that its deletion may
// destroy and delete it: a state another live object owns is neither
// (an event says whose it is and that it stays).
func (g *stateGuard) ownsState(ctx context.Context, obj *infrav1.Terraform) (bool, error) {
	if customBackend(obj) != "" {
		return true, nil
	}
	err := g.keeper.Check(ctx, obj)
	var elsewhere *custody.OwnedElsewhereError
	if errors.As(err, &elsewhere) {
		g.report.event(obj, "", corev1.EventTypeNormal, infrav1.StateOwnedElsewhereReason,
			"deletion destroys nothing and keeps %s %s: it is the state of Terraform %s, not of this object", elsewhere.Kind, elsewhere.Name, elsewhere.Owner)
		return false, nil
	}
	if err != nil {
		return false, outcome.Retry(infrav1.DestroyFailedReason, "checking who owns the state before deleting it: %v", err)
	}
	return true, nil
}

// stateCustodyError is a stalling StateOwnedElsewhere for a state that is
// another object's, a retry otherwise.
func stateCustodyError(err error) error {
	var owned *custody.OwnedElsewhereError
	if errors.As(err, &owned) {
		return outcome.Stalling(infrav1.StateOwnedElsewhereReason, "%v", err)
	}
	return outcome.Retry(infrav1.StateOwnedElsewhereReason, "checking who owns the state: %v", err)
}

// Deleting a namespace that holds Terraform objects: the API server
// refuses every create in it from then on (a runner Pod, a state token),
// and the namespace controller deletes its Secrets, the state among them,
// while the objects wait on their finalizer. The state Secret carries
// StateFinalizer (internal/custody), so it stays. No destroy can start
// there any more, so deletion stops, Stalled, and a person decides what
// cannot be decided for them, told exactly how: save the state and
// release it. A destroy already under way is collected first.

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get

// releaseCheckEvery is how often a Stalled NamespaceTerminating looks
// whether a person released the state: nothing watches state Secrets.
const releaseCheckEvery = 30 * time.Second

// terminatingVerdict is what deletion does in obj's namespace.
type terminatingVerdict int

const (
	// deleteAsUsual: the namespace is not being deleted, or the destroy
	// has run.
	deleteAsUsual terminatingVerdict = iota
	// letGo: the namespace is being deleted and the state is no longer
	// guarded (a person saved and released it, or there never was one):
	// nothing is destroyed, the object goes.
	letGo
)

// inTerminatingNamespace decides deletion's course when obj's namespace is
// being deleted: as usual, let go, or a stalling NamespaceTerminating
// whose message says how to keep the resources.
func (g *stateGuard) inTerminatingNamespace(ctx context.Context, obj *infrav1.Terraform, destroyed bool) (terminatingVerdict, error) {
	if customBackend(obj) != "" {
		return deleteAsUsual, nil
	}
	terminating, err := g.keeper.NamespaceTerminating(ctx, obj.Namespace)
	if err != nil {
		return deleteAsUsual, outcome.Retry(infrav1.DestroyFailedReason, "%v", err)
	}
	if !terminating {
		return deleteAsUsual, nil
	}
	protected, err := g.keeper.Protected(ctx, obj)
	if err != nil {
		return deleteAsUsual, outcome.Retry(infrav1.NamespaceTerminatingReason, "%v", err)
	}
	if !protected {
		g.report.event(obj, "", corev1.EventTypeWarning, infrav1.NamespaceTerminatingReason,
			"namespace %s is being deleted and the state is not guarded any more (released by a person, or never written): nothing is destroyed, the resources stay", obj.Namespace)
		return letGo, nil
	}
	switch {
	case obj.GetDeletionPolicy() == infrav1.DeletionPolicyOrphan:
		return deleteAsUsual, outcome.StalledUntil(infrav1.NamespaceTerminatingReason, releaseCheckEvery,
			"namespace %s is being deleted, and with it Secret %s, the state of the resources deletionPolicy Orphan keeps; %s",
			obj.Namespace, names.StateSecret(obj), saveAndRelease(obj))
	case !destroyed:
		// Measured, not assumed: with local runners too the destroy
		// cannot start, as the namespace controller deletes the state's
		// Lease and identity and the API server refuses to create them
		// again (and a runner Pod, and a kept state version).
		return deleteAsUsual, outcome.StalledUntil(infrav1.NamespaceTerminatingReason, releaseCheckEvery,
			"namespace %s is being deleted: Kubernetes refuses what a destroy needs there (a runner, the state's identity and lock), so the resources stay; the state is kept in Secret %s (finalizer %s) until you decide: %s",
			obj.Namespace, names.StateSecret(obj), infrav1.StateFinalizer, saveAndRelease(obj))
	}
	return deleteAsUsual, nil
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
