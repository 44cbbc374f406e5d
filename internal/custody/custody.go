// Package custody decides who owns a Terraform object's state on the
// default (kubernetes) backend, and records it: one state, one owner.
//
// The engine's backend names a state Secret tfstate-<workspace>-<suffix>,
// a name two objects can both resolve to (a secretSuffix naming another
// object's state, workspace "x-y" with object "a" and workspace "x" with
// object "y-a", a kept copy Landform once named <state>-v<n>). Names alone
// cannot keep states apart, so ownership is recorded on the state itself:
// the state Secret and its Lease carry the owner's UID (OwnerUIDLabel) and
// full name (OwnerAnnotation). An object claims its state before any run
// (Claim); a state another live object owns, or a Secret that holds a kept
// copy of another object's state, is refused with an *OwnedElsewhereError
// before anything plans, and deletion neither destroys nor deletes a state
// its object does not own (Check).
//
// The state Secret also carries StateFinalizer while its owner lives, so
// that deleting the namespace cannot sweep the state before the destroy
// ran (or before a person saved it): Release removes it.
//
// A state without an owner, written before ownership was recorded or by
// `landform migrate`, is adopted, by the oldest live object resolving to
// it: after an upgrade, the object that always had the state keeps it,
// whichever of the two reconciles first. A state whose recorded owner is
// gone (deletionPolicy Orphan kept it) is adopted by the next claimant.
package custody

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/source"
	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/tfstate"
)

// keptCopyLabels mark Secrets that hold a copy of some object's state
// (internal/statehistory, internal/unsavedstate): such a Secret is never
// anyone's live state. Spelled here rather than imported: those packages
// use this one.
var keptCopyLabels = []string{"infra.landform.dev/state-history", "infra.landform.dev/unsaved-state"}

// Keeper is the custody of the states of Terraform objects: who owns each
// (Claim, Check, Protected, Release), the identity runners reach it with
// (Issue, Reusable, Forget, DeleteIdentity, DeleteLease), its lock
// (ReleaseGoneLock), the state an apply could not save (PushUnsaved), its
// kept versions (KeepVersion), the artifact kept for its destroy
// (KeepArtifact, KeptArtifact) and its end (DeleteState). Reader reads the state Secret and Lease
// uncached (the controller's API reader): a claim decided on a stale read
// could hand one state to two objects. Objects lists and reads Terraform
// objects (the manager's cache is enough: their UIDs do not change).
type Keeper struct {
	Client  client.Client
	Reader  client.Reader
	Objects client.Reader
	// Namespaces reads namespaces' metadata from a cache (the manager's
	// client, which watches it): whether a namespace admits only
	// previews or is being deleted is asked before every run, and a
	// read from the API server would wait on the run's path. A namespace
	// the cache has not seen is read through Reader (one created a
	// moment ago), as the API server's own NamespaceLifecycle admission
	// does; a label changed a moment ago is seen once the watch brings
	// it, milliseconds later. Nil: Reader.
	Namespaces client.Reader
	// FieldOwner is the field manager of the state identity's writes.
	FieldOwner string
	// HistoryLimit is how many versions of a state are kept before its
	// applies and destroys (statehistory.Store's Limit).
	HistoryLimit int
	// Leases reads and releases state locks in a namespace; Secrets
	// writes a state Secret (PushUnsaved). Nil: Landform leaves locks
	// and unsaved states to a person.
	Leases  func(namespace string) coordinationv1client.LeaseInterface
	Secrets func(namespace string) corev1client.SecretInterface
	// Artifacts is the controller's artifact cache; ArtifactMaxSize
	// bounds the artifact kept for a destroy without its source
	// (--kept-artifact-max-size, keptartifact.Store's MaxSize).
	Artifacts       *source.Fetcher
	ArtifactMaxSize int64

	// done remembers what ensureIdentity and ClaimOnce did, and the
	// objects with no unsaved state in the legacy layout (PushUnsaved).
	done sync.Map
}

// OwnedElsewhereError is a state obj may not use: its Secret (or Lease)
// Name belongs to Owner, or is a kept copy of Owner's state.
type OwnedElsewhereError struct {
	// Kind and Name are what was found: "Secret tfstate-default-db".
	Kind, Name string
	// Owner is the object owning it, "<namespace>/<name>".
	Owner string
	// KeptCopy: Name holds a kept version or unsaved state of Owner's,
	// not a live state.
	KeptCopy bool
}

func (e *OwnedElsewhereError) Error() string {
	if e.KeptCopy {
		return fmt.Sprintf("%s %s holds a kept copy of Terraform %s's state, not a state of its own: give this object another state (spec.backendConfig.secretSuffix or spec.workspace)", e.Kind, e.Name, e.Owner)
	}
	return fmt.Sprintf("%s %s is the state of Terraform %s: one state has one owner; give this object its own state (spec.backendConfig.secretSuffix or spec.workspace), or delete %s first", e.Kind, e.Name, e.Owner, e.Owner)
}

// Labels are the ownership labels Claim puts on obj's state Secret and
// Lease, besides the backend's own.
func Labels(obj *v1alpha1.Terraform) map[string]string {
	return map[string]string{
		v1alpha1.OwnerUIDLabel:  string(obj.UID),
		v1alpha1.OwnerNameLabel: names.Label(obj.Name),
	}
}

// Claim makes obj the owner of its state Secret and Lease: it creates them
// when missing (the Secret holding an empty state of a new lineage, see
// tfstate.SeedAnnotation), adopts them when nobody owns them, and refuses
// them with an *OwnedElsewhereError when another live object does.
func (k *Keeper) Claim(ctx context.Context, obj *v1alpha1.Terraform) error {
	secret := names.StateSecret(obj)
	labels := statelock.LeaseLabels(obj.GetWorkspace(), names.SecretSuffix(obj))
	for key, v := range Labels(obj) {
		labels[key] = v
	}
	state := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: secret, Labels: labels,
		Annotations: map[string]string{"encoding": "gzip", v1alpha1.OwnerAnnotation: obj.Name},
		Finalizers:  []string{v1alpha1.StateFinalizer}}}
	// The seed is made only for a Secret about to be created: after a
	// restart every object claims again and finds its state, and the
	// seed's gzip costs about 0.15 ms and 0.8 MB of allocations.
	seed := func() {
		lineage := statelock.NewID()
		state.Annotations[tfstate.SeedAnnotation] = lineage
		state.Data = map[string][]byte{tfstate.DataKey: tfstate.Empty(lineage)}
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: statelock.LeaseName(secret), Labels: labels,
		Annotations: map[string]string{v1alpha1.OwnerAnnotation: obj.Name}}}
	// One after the other, the Secret first: it decides who owns the
	// state, and a refused claimant must not create the Lease.
	fresh := neverRan(obj)
	if err := k.claim(ctx, obj, state, seed, fresh); err != nil {
		return err
	}
	return k.claim(ctx, obj, lease, nil, fresh)
}

// neverRan reports whether obj's status records nothing of a reconcile
// that got as far as its state: a new object, whose state is most likely
// missing.
func neverRan(obj *v1alpha1.Terraform) bool {
	return obj.Status.Run == nil && obj.Status.LastAttemptedRevision == "" && obj.Status.LastAppliedRevision == ""
}

// claim creates o when missing (beforeCreate, if any, completing it
// first), adopts it when nobody owns it, and refuses it when another live
// object does. It reads o first, since after a restart every object
// claims again and finds its state; for a fresh object it creates o first
// instead, two reads fewer on a new object's way to its first run, and
// reads it only when it exists (an orphaned state adopted, another
// tool's).
func (k *Keeper) claim(ctx context.Context, obj *v1alpha1.Terraform, o client.Object, beforeCreate func(), fresh bool) error {
	gvk := gvkOf(o)
	kind := gvk.Kind
	found := &metav1.PartialObjectMetadata{}
	found.SetGroupVersionKind(gvk)
	missing := fresh
	if !fresh {
		err := k.Reader.Get(ctx, client.ObjectKeyFromObject(o), found)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading the state %s %s: %w", kind, o.GetName(), err)
		}
		missing = err != nil
	}
	if missing {
		if beforeCreate != nil {
			beforeCreate()
		}
		err := k.Client.Create(ctx, o)
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the state %s %s: %w", kind, o.GetName(), err)
		}
		if err := k.Reader.Get(ctx, client.ObjectKeyFromObject(o), found); err != nil {
			return fmt.Errorf("reading the state %s %s: %w", kind, o.GetName(), err)
		}
	}
	adopt, err := k.decide(ctx, obj, kind, found)
	if err != nil {
		return err
	}
	finalizers, protect := withFinalizer(found.Finalizers)
	if !adopt && (kind != "Secret" || !protect) {
		return nil
	}
	meta := map[string]any{"resourceVersion": found.ResourceVersion}
	if adopt {
		meta["labels"] = Labels(obj)
		meta["annotations"] = map[string]string{v1alpha1.OwnerAnnotation: obj.Name}
	}
	if kind == "Secret" && protect {
		meta["finalizers"] = finalizers
	}
	patch, _ := json.Marshal(map[string]any{"metadata": meta})
	if err := k.Client.Patch(ctx, found, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("recording Terraform %s as the owner of the state %s %s: %w", obj.Name, kind, o.GetName(), err)
	}
	return nil
}

// withFinalizer is finalizers with StateFinalizer, and whether it was
// missing.
func withFinalizer(finalizers []string) ([]string, bool) {
	if slices.Contains(finalizers, v1alpha1.StateFinalizer) {
		return finalizers, false
	}
	return append(slices.Clone(finalizers), v1alpha1.StateFinalizer), true
}

// Protected reports whether obj's state Secret exists and still carries
// StateFinalizer: nobody let it go.
func (k *Keeper) Protected(ctx context.Context, obj *v1alpha1.Terraform) (bool, error) {
	found, err := k.stateMeta(ctx, obj)
	if found == nil || err != nil {
		return false, err
	}
	return slices.Contains(found.Finalizers, v1alpha1.StateFinalizer), nil
}

// Release removes StateFinalizer from every state Secret obj owns (its
// current one, and one it had before spec.workspace or secretSuffix
// changed): its deletion destroyed the state, or keeps it (deletionPolicy
// Orphan) without guarding it any more. A state left guarded would hold
// its namespace's deletion for ever.
func (k *Keeper) Release(ctx context.Context, obj *v1alpha1.Terraform) error {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := k.Reader.List(ctx, list, client.InNamespace(obj.Namespace), client.MatchingLabels{v1alpha1.OwnerUIDLabel: string(obj.UID)}); err != nil {
		return fmt.Errorf("listing the state Secrets of %s/%s: %w", obj.Namespace, obj.Name, err)
	}
	for i := range list.Items {
		found := &list.Items[i]
		if !slices.Contains(found.Finalizers, v1alpha1.StateFinalizer) {
			continue
		}
		kept := slices.DeleteFunc(slices.Clone(found.Finalizers), func(f string) bool { return f == v1alpha1.StateFinalizer })
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": found.ResourceVersion, "finalizers": kept}})
		if err := k.Client.Patch(ctx, found, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("releasing the state Secret %s: %w", found.Name, err)
		}
	}
	return nil
}

// stateMeta is the metadata of obj's state Secret; nil when it does not
// exist.
func (k *Keeper) stateMeta(ctx context.Context, obj *v1alpha1.Terraform) (*metav1.PartialObjectMetadata, error) {
	found := &metav1.PartialObjectMetadata{}
	found.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := k.Reader.Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: names.StateSecret(obj)}, found)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the state Secret %s: %w", names.StateSecret(obj), err)
	}
	return found, nil
}

// Check returns an *OwnedElsewhereError when obj's state Secret belongs to
// another object, a *NeverClaimedError when its recorded owner is gone and
// obj never claimed it, nil when it is obj's, has no other claimant, or
// does not exist. It writes nothing: deletion asks it before destroying or
// deleting a state.
//
// Deletion never adopts a state Claim would: a state whose owner's
// deletion (deletionPolicy Orphan) kept it, found by an object that never
// ran on it (one Stalled with StateOwnedElsewhere while that owner lived),
// holds the owner's resources, which the Orphan meant to keep; it is left
// for the next object that claims it.
func (k *Keeper) Check(ctx context.Context, obj *v1alpha1.Terraform) error {
	found, err := k.stateMeta(ctx, obj)
	if found == nil || err != nil {
		return err
	}
	adopt, err := k.decide(ctx, obj, "Secret", found)
	if err == nil && adopt && found.Labels[v1alpha1.OwnerUIDLabel] != "" {
		return &NeverClaimedError{Name: found.Name, Owner: obj.Namespace + "/" + found.Annotations[v1alpha1.OwnerAnnotation]}
	}
	return err
}

// NeverClaimedError: the state Secret Name was Owner's, which is gone, and
// the object asking never claimed it.
type NeverClaimedError struct {
	Name, Owner string
}

func (e *NeverClaimedError) Error() string {
	return fmt.Sprintf("Secret %s is the state Terraform %s left (it is gone), and this object never ran on it", e.Name, e.Owner)
}

// decide says whether obj may take found (adopt: it has no owner label of
// obj's yet), or who owns it instead.
func (k *Keeper) decide(ctx context.Context, obj *v1alpha1.Terraform, kind string, found *metav1.PartialObjectMetadata) (adopt bool, err error) {
	for _, l := range keptCopyLabels {
		if v := found.Labels[l]; v != "" {
			owner := found.Labels[v1alpha1.OwnerNameLabel]
			if owner == "" {
				owner = v
			}
			return false, &OwnedElsewhereError{Kind: kind, Name: found.Name, Owner: obj.Namespace + "/" + owner, KeptCopy: true}
		}
	}
	uid := found.Labels[v1alpha1.OwnerUIDLabel]
	if uid == string(obj.UID) {
		return false, nil
	}
	if uid != "" {
		owner, err := k.object(ctx, obj.Namespace, found.Annotations[v1alpha1.OwnerAnnotation])
		if err != nil {
			return false, err
		}
		if owner != nil && string(owner.UID) == uid {
			return false, &OwnedElsewhereError{Kind: kind, Name: found.Name, Owner: obj.Namespace + "/" + owner.Name}
		}
		// Its owner is gone (deletionPolicy Orphan kept the state).
		return true, nil
	}
	// Nobody recorded: the oldest live object resolving to this state.
	first, err := k.firstClaimant(ctx, obj)
	if err != nil {
		return false, err
	}
	if first != nil && first.UID != obj.UID {
		return false, &OwnedElsewhereError{Kind: kind, Name: found.Name, Owner: obj.Namespace + "/" + first.Name}
	}
	return true, nil
}

func (k *Keeper) object(ctx context.Context, namespace, name string) (*v1alpha1.Terraform, error) {
	if name == "" {
		return nil, nil
	}
	o := &v1alpha1.Terraform{}
	err := k.Objects.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, o)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Terraform %s/%s, the recorded owner of a state: %w", namespace, name, err)
	}
	return o, nil
}

// firstClaimant is the oldest live object of obj's namespace whose state
// is obj's (obj itself included), by creation time, then name.
func (k *Keeper) firstClaimant(ctx context.Context, obj *v1alpha1.Terraform) (*v1alpha1.Terraform, error) {
	var list v1alpha1.TerraformList
	if err := k.Objects.List(ctx, &list, client.InNamespace(obj.Namespace)); err != nil {
		return nil, fmt.Errorf("listing the Terraform objects of namespace %s: %w", obj.Namespace, err)
	}
	state := names.StateSecret(obj)
	var claimants []*v1alpha1.Terraform
	for i := range list.Items {
		o := &list.Items[i]
		if CustomBackend(o) {
			continue
		}
		if o.UID != obj.UID && names.StateSecret(o) == state {
			claimants = append(claimants, o)
		}
	}
	claimants = append(claimants, obj)
	sort.SliceStable(claimants, func(i, j int) bool {
		a, b := claimants[i].CreationTimestamp, claimants[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return claimants[i].Name < claimants[j].Name
	})
	return claimants[0], nil
}

// gvkOf is the kind of the state object o: a Lease, or the Secret.
func gvkOf(o client.Object) schema.GroupVersionKind {
	if _, ok := o.(*coordinationv1.Lease); ok {
		return coordinationv1.SchemeGroupVersion.WithKind("Lease")
	}
	return corev1.SchemeGroupVersion.WithKind("Secret")
}

// NamespaceTerminating reports whether namespace is being deleted (or is
// gone): no state can be made there any more, and its Secrets are being
// swept.
func (k *Keeper) NamespaceTerminating(ctx context.Context, namespace string) (bool, error) {
	ns, err := k.namespace(ctx, namespace)
	if err != nil {
		return false, err
	}
	return ns == nil || !ns.DeletionTimestamp.IsZero(), nil
}

// namespace reads a namespace's metadata; nil when it is gone.
func (k *Keeper) namespace(ctx context.Context, name string) (*metav1.PartialObjectMetadata, error) {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	var err error
	if k.Namespaces != nil {
		err = k.Namespaces.Get(ctx, client.ObjectKey{Name: name}, ns)
	}
	if k.Namespaces == nil || apierrors.IsNotFound(err) {
		err = k.Reader.Get(ctx, client.ObjectKey{Name: name}, ns)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading namespace %s: %w", name, err)
	}
	return ns, nil
}
