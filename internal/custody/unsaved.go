package custody

import (
	"context"
	"errors"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/unsavedstate"
)

// ErrNotOurBackend: the state's lock, or a state an apply could not save,
// is in a backend Landform neither reads nor writes (a custom one, or a
// Keeper without Leases and Secrets): only a person can act on it.
var ErrNotOurBackend = errors.New("Landform writes only its default backend")

// unsaved is the store of the unsaved states, remembering in k.done the
// objects with none under the legacy name.
func (k *Keeper) unsaved() unsavedstate.Store {
	return unsavedstate.Store{Client: k.Client, NoLegacy: &k.done}
}

// UnsavedStates is the store through which runs keep the states they
// could not save.
func (k *Keeper) UnsavedStates() unsavedstate.Store { return k.unsaved() }

// PushUnsaved writes the state an earlier apply or destroy could not save
// (kept in Secret tfunsaved-<name>-0) into obj's backend, as `landform
// state push` does: under the state lock, taken as controllerHolder. It
// returns what was kept (nil: nothing, one metadata read) and what the
// push did. A lock someone else holds fails with *statelock.LockedError;
// a state the backend refuses (another lineage, a newer serial) with
// tfstate's refusal; a backend Landform does not write with
// ErrNotOurBackend.
func (k *Keeper) PushUnsaved(ctx context.Context, obj *v1alpha1.Terraform) (*unsavedstate.State, *unsavedstate.Pushed, error) {
	store := k.unsaved()
	kept, err := store.Stat(ctx, obj)
	if err != nil || kept == nil {
		return nil, nil, err
	}
	if CustomBackend(obj) || k.Secrets == nil || k.Leases == nil {
		return kept, nil, ErrNotOurBackend
	}
	holder, err := controllerHolder()
	if err != nil {
		return kept, nil, err
	}
	b := unsavedstate.Backend{Secrets: k.Secrets(obj.Namespace), Leases: k.Leases(obj.Namespace)}
	pushed, err := store.Push(ctx, obj, b, holder, false)
	return kept, pushed, err
}
