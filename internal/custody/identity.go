package custody

import (
	"context"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
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

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
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
// RBAC cannot name objects in create, so the state Secret (holding an
// empty state) and the Lease are made first, by Claim.

const (
	// tokenMinLife is the shortest token the API server issues; tokenSlack
	// is added to the run's deadline.
	tokenMinLife = 10 * time.Minute
	tokenSlack   = 15 * time.Minute
	// tokenNoDeadline is a token's life for a run without deadline.
	tokenNoDeadline = 24 * time.Hour
	// tokenReuseWithin is how old a token may be for the following run on
	// the same runner (an apply after its plan) to use it.
	tokenReuseWithin = 5 * time.Minute
)

// tokenLife is the life of a state token for a run with the given
// deadline.
func tokenLife(deadline time.Duration) time.Duration {
	if deadline <= 0 {
		return tokenNoDeadline
	}
	return max(tokenMinLife, deadline+tokenSlack)
}

// Reusable keeps a reused runner's token when it was issued within
// tokenReuseWithin, so that it lives nearly as long as a new one would.
func (k *Keeper) Reusable(validUntil time.Time, deadline time.Duration) bool {
	return time.Until(validUntil) >= tokenLife(deadline)-tokenReuseWithin
}

// Issue returns a token of obj's state identity for a run with the given
// deadline, and until when it is valid, preparing the identity and
// claiming the state first. A custom backend has no state here: no token.
func (k *Keeper) Issue(ctx context.Context, obj *v1alpha1.Terraform, deadline time.Duration) (string, time.Time, error) {
	if CustomBackend(obj) {
		return "", time.Time{}, nil
	}
	if err := k.ensureIdentity(ctx, obj); err != nil {
		return "", time.Time{}, fmt.Errorf("preparing the runners' state identity %s/%s: %w", obj.Namespace, names.StateIdentity(obj), err)
	}
	life := tokenLife(deadline)
	issued := time.Now()
	seconds := int64(life / time.Second)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: names.StateIdentity(obj)}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
	if err := k.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", time.Time{}, fmt.Errorf("issuing a token for the runners' state identity %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	validUntil := issued.Add(life)
	if tr.Status.ExpirationTimestamp.Before(&metav1.Time{Time: validUntil}) {
		// The API server may shorten a token's life.
		validUntil = tr.Status.ExpirationTimestamp.Time
	}
	return tr.Status.Token, validUntil, nil
}

// ensureIdentity applies obj's state ServiceAccount, Role and RoleBinding,
// and claims its state Secret and Lease. What was done is remembered, one
// round of writes per object and workspace in a process's life, until a
// run fails (Forget): an identity, Secret or Lease deleted meanwhile is
// then made again.
func (k *Keeper) ensureIdentity(ctx context.Context, obj *v1alpha1.Terraform) error {
	key := identityKey(obj)
	if _, done := k.done.Load(key); done {
		return nil
	}
	secret := names.StateSecret(obj)
	lease := statelock.LeaseName(secret)
	name := names.StateIdentity(obj)
	labels := owned.Labels(obj)
	apply := func(o runtime.ApplyConfiguration) error {
		return k.Client.Apply(ctx, o, client.FieldOwner(k.FieldOwner), client.ForceOwnership)
	}
	// Owned by the object while it lives, so that they go with it. Once it
	// is being deleted, not: in a foreground deletion the garbage collector
	// deletes an object's dependents before its finalizer is done, and the
	// destroy needs this identity. DeleteIdentity removes them then.
	var refs []*metav1ac.OwnerReferenceApplyConfiguration
	if obj.DeletionTimestamp.IsZero() {
		refs = append(refs, owned.Reference(obj))
	}
	sa := corev1ac.ServiceAccount(name, obj.Namespace).WithLabels(labels).WithOwnerReferences(refs...).
		WithAutomountServiceAccountToken(false)
	role := rbacv1ac.Role(name, obj.Namespace).WithLabels(labels).WithOwnerReferences(refs...).WithRules(
		rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("secrets").WithResourceNames(secret).
			WithVerbs("get", "list", "watch", "update", "patch"),
		rbacv1ac.PolicyRule().WithAPIGroups("coordination.k8s.io").WithResources("leases").WithResourceNames(lease).
			WithVerbs("get", "update", "patch"),
	)
	binding := rbacv1ac.RoleBinding(name, obj.Namespace).WithLabels(labels).WithOwnerReferences(refs...).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("Role").WithName(name)).
		WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(name).WithNamespace(obj.Namespace))
	// The ServiceAccount, the Role and the state's claim at once; the
	// RoleBinding after its Role: RBAC lets a controller without the bind
	// verb bind only a Role it can read the rules of and holds them all,
	// and a Role not there yet is refused as not found. The token is
	// asked for once all are there.
	var g errgroup.Group
	g.Go(func() error { return apply(sa) })
	g.Go(func() error {
		if err := apply(role); err != nil {
			return err
		}
		return apply(binding)
	})
	g.Go(func() error { return k.ClaimOnce(ctx, obj) })
	if err := g.Wait(); err != nil {
		return err
	}
	k.done.Store(key, struct{}{})
	return nil
}

// ClaimOnce is Claim, remembered like the identity until a run fails
// (Forget): one read per object and process once it is claimed.
func (k *Keeper) ClaimOnce(ctx context.Context, obj *v1alpha1.Terraform) error {
	if CustomBackend(obj) {
		return nil
	}
	key := claimPrefix + identityKey(obj)
	if _, done := k.done.Load(key); done {
		return nil
	}
	if err := k.Claim(ctx, obj); err != nil {
		return err
	}
	k.done.Store(key, struct{}{})
	return nil
}

// identityKey names what ensureIdentity remembers: the object, its state,
// and whether it is being deleted (the identity is applied once more then,
// without owner references).
func identityKey(obj *v1alpha1.Terraform) string {
	key := string(obj.UID) + "/" + names.StateSecret(obj)
	if !obj.DeletionTimestamp.IsZero() {
		key += deletingSuffix
	}
	return key
}

const (
	deletingSuffix = "/deleting"
	claimPrefix    = "claim/"
)

// Forget makes the next run apply obj's state identity and claim its
// state again.
func (k *Keeper) Forget(obj *v1alpha1.Terraform) {
	k.done.Delete(identityKey(obj))
	k.done.Delete(claimPrefix + identityKey(obj))
}

// DeleteIdentity deletes obj's state ServiceAccount, Role and RoleBinding
// when its deletion is done (they may have lost their owner reference for
// the destroy).
func (k *Keeper) DeleteIdentity(ctx context.Context, obj *v1alpha1.Terraform) error {
	meta := metav1.ObjectMeta{Namespace: obj.Namespace, Name: names.StateIdentity(obj)}
	for _, o := range []client.Object{&rbacv1.RoleBinding{ObjectMeta: meta}, &rbacv1.Role{ObjectMeta: meta}, &corev1.ServiceAccount{ObjectMeta: meta}} {
		if err := k.Client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the state identity %T %s/%s: %w", o, meta.Namespace, meta.Name, err)
		}
	}
	// Both what was remembered while it lived and while it was deleted,
	// and that it had no unsaved state under the legacy name.
	key := identityKey(obj)
	for _, key := range []string{key, strings.TrimSuffix(key, deletingSuffix)} {
		k.done.Delete(key)
		k.done.Delete(claimPrefix + key)
	}
	k.unsaved().ObjectGone(obj)
	return nil
}

// DeleteLease deletes the state's Lease with the state (deletionPolicy
// Delete).
func (k *Keeper) DeleteLease(ctx context.Context, obj *v1alpha1.Terraform) error {
	if CustomBackend(obj) {
		return nil
	}
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: names.StateLease(obj)}}
	if err := k.Client.Delete(ctx, l); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the state Lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	return nil
}

// CustomBackend: the state is not the kubernetes backend's here, and
// Landform keeps no custody of it.
func CustomBackend(obj *v1alpha1.Terraform) bool {
	return obj.Spec.BackendConfig != nil && obj.Spec.BackendConfig.CustomConfiguration != ""
}
