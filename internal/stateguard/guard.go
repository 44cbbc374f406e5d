// Package stateguard is where the reconciler meets the custody of a
// Terraform object's state (internal/custody): it claims the state before
// a run and refuses one another object owns (StateOwnedElsewhere), writes
// back a state an apply could not save, releases a lock whose runner is
// provably gone, keeps the applied artifact for a destroy without its
// source, and decides what deletion does in a terminating namespace. Each
// of its steps returns an internal/outcome error whose reason and message
// say what happened and what a person can do, and records the events and
// metrics that go with it; custody itself knows nothing of conditions.
package stateguard

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/custody"
	"github.com/landform-dev/landform/internal/outcome"
	"github.com/landform-dev/landform/internal/runs"
)

// Guard turns what a Terraform object's state custody finds into the
// object's outcomes, conditions, events and metrics.
type Guard struct {
	Keeper *custody.Keeper
	Events Events
	// Runs tells what a run in flight reported of a state it could not
	// save.
	Runs *runs.Tracker
}

// Events records events on an object (the reconciler's event recorder):
// messages with names, ids and counts, never values.
type Events interface {
	Event(obj *infrav1.Terraform, revision, eventType, reason, format string, args ...any)
	PlanEvent(obj *infrav1.Terraform, id, revision, eventType, reason, format string, args ...any)
}

// Claim makes obj the owner of its state before anything runs: a
// state another live object owns stalls with StateOwnedElsewhere, naming
// the owner.
func (g *Guard) Claim(ctx context.Context, obj *infrav1.Terraform) error {
	if err := g.Keeper.ClaimOnce(ctx, obj); err != nil {
		return stateCustodyError(err)
	}
	return nil
}

// Owns reports whether obj owns its state, so that its deletion may
// destroy and delete it: a state another live object owns is neither
// (an event says whose it is and that it stays).
func (g *Guard) Owns(ctx context.Context, obj *infrav1.Terraform) (bool, error) {
	if custody.CustomBackend(obj) {
		return true, nil
	}
	err := g.Keeper.Check(ctx, obj)
	var elsewhere *custody.OwnedElsewhereError
	if errors.As(err, &elsewhere) {
		g.Events.Event(obj, "", corev1.EventTypeNormal, infrav1.StateOwnedElsewhereReason,
			"deletion destroys nothing and keeps %s %s: it is the state of Terraform %s, not of this object", elsewhere.Kind, elsewhere.Name, elsewhere.Owner)
		return false, nil
	}
	var never *custody.NeverClaimedError
	if errors.As(err, &never) {
		g.Events.Event(obj, "", corev1.EventTypeNormal, infrav1.StateOwnedElsewhereReason,
			"deletion destroys nothing and keeps %v: it stays for the next object that claims it", never)
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
