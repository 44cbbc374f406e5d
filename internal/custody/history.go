package custody

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/statehistory"
	"github.com/landform-dev/landform/internal/tfstate"
)

// history is the store of obj's kept state versions, read uncached so
// that a version just kept is never missed.
func (k *Keeper) history() statehistory.Store {
	return statehistory.Store{Client: k.Client, Reader: k.Reader, Limit: k.HistoryLimit}
}

// KeepVersion keeps the state as it is before a run that writes it (an
// apply or a destroy), so that a person can restore it (`landform state
// restore`); why and revision say what follows. A custom backend's state
// is the backend's to keep. In a namespace being deleted no Secret can be
// made, and a version would go with the namespace: none is kept.
func (k *Keeper) KeepVersion(ctx context.Context, obj *v1alpha1.Terraform, why, revision string) error {
	if CustomBackend(obj) {
		return nil
	}
	_, err := k.history().Keep(ctx, obj, why, revision)
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return nil
	}
	return err
}

// DeleteState deletes obj's state with deletionPolicy Delete, once the
// destroy ran: the state Secret (released first), its kept versions (those
// carrying obj's UID) and its Lease.
func (k *Keeper) DeleteState(ctx context.Context, obj *v1alpha1.Terraform) error {
	if CustomBackend(obj) {
		return nil
	}
	if err := k.Release(ctx, obj); err != nil {
		return err
	}
	state := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: names.StateSecret(obj)}}
	if err := k.Client.Delete(ctx, state); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the state Secret %s/%s: %w", state.Namespace, state.Name, err)
	}
	if err := k.history().DeleteAll(ctx, obj); err != nil {
		return err
	}
	return k.DeleteLease(ctx, obj)
}

// HoldsResources reports whether obj's state may hold resources, which a
// deletion destroys: the default backend's state Secret holds a state
// that lists any, or one this cannot read (encrypted); not the empty
// state Claim creates it with, nor one a plan left without resources. For
// a custom backend, whether obj ever applied.
func (k *Keeper) HoldsResources(ctx context.Context, obj *v1alpha1.Terraform) (bool, error) {
	if CustomBackend(obj) {
		return obj.Status.LastAppliedRevision != "", nil
	}
	var s corev1.Secret
	err := k.Reader.Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: names.StateSecret(obj)}, &s)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("checking for state Secret %s: %w", names.StateSecret(obj), err)
	}
	return tfstate.HoldsResources(s.Data[tfstate.DataKey]), nil
}
