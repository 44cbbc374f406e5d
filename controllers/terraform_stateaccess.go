package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/custody"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/owned"
	"github.com/landform-dev/landform/internal/statelock"
)

// The state identity: every Terraform object's runners reach its state
// under an identity of their own, a ServiceAccount whose Role names only
// the object's state Secret and state Lease. The runner Pod's own
// ServiceAccount (the user's, or landform-runner) needs no Kubernetes
// permission at all: a module, which runs with it, reaches neither plans,
// nor outputs, nor run logs, nor any other Secret or state of the namespace.
//
// RBAC cannot name objects in create, so the controller creates the state
// Secret (empty: the backend reads it as no state) and the Lease first.

// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;create;patch;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;create;patch;delete

const (
	// stateTokenMinLife is the shortest token the API server issues;
	// stateTokenSlack is added to the run's deadline.
	stateTokenMinLife = 10 * time.Minute
	stateTokenSlack   = 15 * time.Minute
	// stateTokenNoDeadline is a token's life for a run without deadline.
	stateTokenNoDeadline = 24 * time.Hour
	// stateTokenReuseWithin is how old a token may be for the following
	// run on the same runner (an apply after its plan) to use it.
	stateTokenReuseWithin = 5 * time.Minute
)

// stateTokenLife is the life of a state token for a run with the given
// deadline.
func stateTokenLife(deadline time.Duration) time.Duration {
	if deadline <= 0 {
		return stateTokenNoDeadline
	}
	return max(stateTokenMinLife, deadline+stateTokenSlack)
}

// stateToken returns a token of obj's state identity for a run with the
// given deadline, and until when it is valid, preparing the identity, the
// state Secret and the Lease first. A custom backend has no state here: no
// token.
func (r *TerraformReconciler) stateToken(ctx context.Context, obj *infrav1.Terraform, deadline time.Duration) (string, time.Time, error) {
	if customBackend(obj) != "" {
		return "", time.Time{}, nil
	}
	if err := r.ensureStateIdentity(ctx, obj); err != nil {
		return "", time.Time{}, fmt.Errorf("preparing the runners' state identity %s/%s: %w", obj.Namespace, names.StateIdentity(obj), err)
	}
	life := stateTokenLife(deadline)
	issued := time.Now()
	seconds := int64(life / time.Second)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: names.StateIdentity(obj)}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
	if err := r.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", time.Time{}, fmt.Errorf("issuing a token for the runners' state identity %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	validUntil := issued.Add(life)
	if tr.Status.ExpirationTimestamp.Before(&metav1.Time{Time: validUntil}) {
		// The API server may shorten a token's life.
		validUntil = tr.Status.ExpirationTimestamp.Time
	}
	return tr.Status.Token, validUntil, nil
}

// ensureStateIdentity applies obj's state ServiceAccount, Role and
// RoleBinding, and creates its state Secret and Lease when missing. What
// was done for these names is remembered, one round of writes per object
// and workspace in a controller's life, until a run fails
// (forgetStateIdentity): an identity, Secret or Lease deleted meanwhile is
// then made again.
func (r *TerraformReconciler) ensureStateIdentity(ctx context.Context, obj *infrav1.Terraform) error {
	secret := names.StateSecret(obj)
	lease := statelock.LeaseName(secret)
	name := names.StateIdentity(obj)
	key := stateIdentityKey(obj)
	if _, done := r.stateIdentities.Load(key); done {
		return nil
	}
	labels := owned.Labels(obj)
	apply := func(o runtime.ApplyConfiguration) error {
		return r.Client.Apply(ctx, o, client.FieldOwner(fieldOwner), client.ForceOwnership)
	}
	// Owned by the object while it lives, so that they go with it. Once it
	// is being deleted, not: in a foreground deletion the garbage collector
	// deletes an object's dependents before its finalizer is done, and the
	// destroy needs this identity. deleteStateIdentity removes them then.
	var refs []*metav1ac.OwnerReferenceApplyConfiguration
	if obj.DeletionTimestamp.IsZero() {
		refs = append(refs, owned.Reference(obj))
	}
	sa := corev1ac.ServiceAccount(name, obj.Namespace).WithLabels(labels).WithOwnerReferences(refs...).
		WithAutomountServiceAccountToken(false)
	if err := apply(sa); err != nil {
		return err
	}
	role := rbacv1ac.Role(name, obj.Namespace).WithLabels(labels).WithOwnerReferences(refs...).WithRules(
		rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("secrets").WithResourceNames(secret).
			WithVerbs("get", "list", "watch", "update", "patch"),
		rbacv1ac.PolicyRule().WithAPIGroups("coordination.k8s.io").WithResources("leases").WithResourceNames(lease).
			WithVerbs("get", "update", "patch"),
	)
	if err := apply(role); err != nil {
		return err
	}
	binding := rbacv1ac.RoleBinding(name, obj.Namespace).WithLabels(labels).WithOwnerReferences(refs...).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("Role").WithName(name)).
		WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(name).WithNamespace(obj.Namespace))
	if err := apply(binding); err != nil {
		return err
	}

	// The state outlives the object (deletionPolicy Orphan keeps it; a
	// destroyed state is kept too): no owner reference, its owner's UID
	// in a label instead (internal/custody).
	if err := r.claimState(ctx, obj); err != nil {
		return err
	}
	r.stateIdentities.Store(key, struct{}{})
	return nil
}

// custody decides who owns a state (internal/custody).
func (r *TerraformReconciler) custody() custody.Keeper {
	return custody.Keeper{Client: r.Client, Reader: r.APIReader, Objects: r.Client}
}

// claimState makes obj the owner of its state Secret and Lease, creating
// them when missing, before anything runs: a state another live object
// owns stalls with StateOwnedElsewhere, naming the owner. Remembered like
// the state identity, until a run fails.
func (r *TerraformReconciler) claimState(ctx context.Context, obj *infrav1.Terraform) error {
	if customBackend(obj) != "" {
		return nil
	}
	key := claimKeyPrefix + stateIdentityKey(obj)
	if _, done := r.stateIdentities.Load(key); done {
		return nil
	}
	if err := r.custody().Claim(ctx, obj); err != nil {
		return stateCustodyError(err)
	}
	r.stateIdentities.Store(key, struct{}{})
	return nil
}

const claimKeyPrefix = "claim/"

// stateCustodyError is a stalling StateOwnedElsewhere for a state that is
// another object's, a retry otherwise.
func stateCustodyError(err error) error {
	var owned *custody.OwnedElsewhereError
	if errors.As(err, &owned) {
		return stalling(infrav1.StateOwnedElsewhereReason, "%v", err)
	}
	return retry(infrav1.StateOwnedElsewhereReason, "checking who owns the state: %v", err)
}

// stateIdentityKey names what ensureStateIdentity remembers: the object,
// its state, and whether it is being deleted (the identity is applied once
// more then, without owner references).
func stateIdentityKey(obj *infrav1.Terraform) string {
	key := string(obj.UID) + "/" + names.StateSecret(obj)
	if !obj.DeletionTimestamp.IsZero() {
		key += deletingKeySuffix
	}
	return key
}

const deletingKeySuffix = "/deleting"

// forgetStateIdentity makes the next run apply obj's state identity and
// create its state Secret and Lease again.
func (r *TerraformReconciler) forgetStateIdentity(obj *infrav1.Terraform) {
	r.stateIdentities.Delete(stateIdentityKey(obj))
	r.stateIdentities.Delete(claimKeyPrefix + stateIdentityKey(obj))
}

// deleteStateIdentity deletes obj's state ServiceAccount, Role and
// RoleBinding when its deletion is done (they may have lost their owner
// reference for the destroy).
func (r *TerraformReconciler) deleteStateIdentity(ctx context.Context, obj *infrav1.Terraform) error {
	meta := metav1.ObjectMeta{Namespace: obj.Namespace, Name: names.StateIdentity(obj)}
	for _, o := range []client.Object{&rbacv1.RoleBinding{ObjectMeta: meta}, &rbacv1.Role{ObjectMeta: meta}, &corev1.ServiceAccount{ObjectMeta: meta}} {
		if err := r.Client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			return retry(infrav1.DestroyFailedReason, "deleting the state identity %T %s/%s: %v", o, meta.Namespace, meta.Name, err)
		}
	}
	// Both what was remembered while it lived and while it was deleted.
	key := stateIdentityKey(obj)
	for _, k := range []string{key, strings.TrimSuffix(key, deletingKeySuffix)} {
		r.stateIdentities.Delete(k)
		r.stateIdentities.Delete(claimKeyPrefix + k)
	}
	return nil
}

// deleteStateLease deletes the state's Lease with the state (deletionPolicy
// Delete).
func (r *TerraformReconciler) deleteStateLease(ctx context.Context, obj *infrav1.Terraform) error {
	if customBackend(obj) != "" {
		return nil
	}
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: names.StateLease(obj)}}
	if err := r.Client.Delete(ctx, l); client.IgnoreNotFound(err) != nil {
		return retry(infrav1.DestroyFailedReason, "deleting the state Lease %s/%s: %v", l.Namespace, l.Name, err)
	}
	return nil
}
