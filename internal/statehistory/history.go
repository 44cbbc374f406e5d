// Package statehistory keeps the last few versions of a Terraform object's
// state (the default backend's state Secret), so that a person can roll
// back a bad apply or a corrupted state: the controller keeps the state as
// it is before every apply and destroy, `landform state history` lists the
// versions and `landform state restore` writes one back.
//
// A version is a Secret tfhistory-<object>-<n> in the object's namespace,
// holding the state Secret's data byte for byte (gzip'd JSON as the
// kubernetes backend writes it: an OpenTofu encrypted state stays exactly
// as encrypted), labelled with the object's name and UID and annotated
// with its serial and lineage when the state is plain. n grows by one per
// version; beyond the limit the oldest go. Versions carry no owner
// reference, like the state Secret itself: deletionPolicy Orphan keeps
// them with the state, Delete removes them with it.
//
// Versions were once named <state Secret>-v<n>, which is also the state
// Secret of an object named <name>-v<n>. Keep and DeleteAll move such a
// version to its new name first (adopt), so that the old name is free for
// that object; a version whose bytes are no longer what was kept (another
// object took the name for its state) is let go, never moved or deleted.
// Pruning and DeleteAll delete only versions labelled with the object's
// own UID.
package statehistory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/owned"
	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/tfstate"
)

// DefaultLimit is how many versions are kept unless told otherwise.
const DefaultLimit = 3

// Label marks a Secret as a kept state version; its value is the
// object's name (as a label value).
const Label = "infra.landform.dev/state-history"

const (
	annPrefix   = "infra.landform.dev/state-"
	annIndex    = annPrefix + "version"
	annSerial   = annPrefix + "serial"
	annLineage  = annPrefix + "lineage"
	annDigest   = annPrefix + "digest"
	annKeptAt   = annPrefix + "kept-at"
	annRun      = annPrefix + "run"
	annRevision = annPrefix + "revision"
	annReason   = annPrefix + "kept-because"
	// annLimit records on each version how many the controller keeps
	// (--state-history), so that `landform state restore` prunes to the
	// controller's depth, not to a default of its own.
	annLimit = annPrefix + "history-limit"
)

// ErrNotFound: no such version, or no state to keep.
var ErrNotFound = errors.New("no such state version")

// Version is one kept state.
type Version struct {
	// Secret is the Secret holding it.
	Secret string
	// Index counts the versions kept for the object, from 1.
	Index int
	// Serial and Lineage are the state's; Serial is -1 when the state is
	// not plain (OpenTofu state encryption).
	Serial  int64
	Lineage string
	// Digest is the sha256 of the state Secret's data.
	Digest string
	KeptAt time.Time
	// Why names what came next: "apply run-…", "destroy run-…", "restore".
	Why string
	// Revision is the source revision of the run that followed.
	Revision string
	// Limit is how many versions the writer of this one kept; 0 when not
	// recorded.
	Limit int

	// uid is the owner UID it is labelled with; legacy is true while it
	// carries the name Landform once gave versions.
	uid    string
	legacy bool
}

// Store keeps versions with Client, reading them with Reader (Client when
// nil; the controller passes its uncached reader so that a version it just
// kept is never missed).
type Store struct {
	Client client.Client
	Reader client.Reader
	// Limit is how many versions are kept (0: DefaultLimit; negative:
	// none).
	Limit int
}

func (s Store) reader() client.Reader {
	if s.Reader != nil {
		return s.Reader
	}
	return s.Client
}

func (s Store) limit() int {
	if s.Limit == 0 {
		return DefaultLimit
	}
	return s.Limit
}

// Keep copies obj's state Secret, as it is now, into a new version, unless
// there is no state, the state holds nothing (facts.empty), or the newest
// version holds the same bytes; then it removes the versions beyond the
// limit. why and revision say what follows.
func (s Store) Keep(ctx context.Context, obj *v1alpha1.Terraform, why, revision string) (*Version, error) {
	if s.limit() < 0 {
		return nil, nil
	}
	var state corev1.Secret
	err := s.reader().Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: names.StateSecret(obj)}, &state)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading state Secret %s: %w", names.StateSecret(obj), err)
	}
	held := readFacts(state.Data[tfstate.DataKey])
	if held.empty {
		return nil, nil
	}
	versions, err := s.adopt(ctx, obj)
	if err != nil {
		return nil, err
	}
	digest := digestOf(state.Data)
	if len(versions) > 0 && versions[0].Digest == digest {
		return &versions[0], s.prune(ctx, obj, versions)
	}
	next := 1
	if len(versions) > 0 {
		next = versions[0].Index + 1
	}
	v := Version{Index: next, Serial: -1, Digest: digest, KeptAt: time.Now().UTC().Truncate(time.Second), Why: why, Revision: revision, Limit: s.limit(), uid: string(obj.UID)}
	v.Serial, v.Lineage = held.serial, held.lineage
	v.Secret = Name(obj, next)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: v.Secret, Labels: labels(obj), Annotations: annotations(v)},
		Type:       corev1.SecretTypeOpaque,
		Data:       state.Data,
	}
	if err := s.Client.Create(ctx, secret); err != nil {
		return nil, fmt.Errorf("keeping state version %d: %w", next, err)
	}
	return &v, s.prune(ctx, obj, append([]Version{v}, versions...))
}

// prune deletes the versions beyond the limit, newest first as given,
// that carry obj's UID.
func (s Store) prune(ctx context.Context, obj *v1alpha1.Terraform, versions []Version) error {
	for _, v := range versions[min(len(versions), s.limit()):] {
		if v.uid != string(obj.UID) {
			continue
		}
		if err := s.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: v.Secret}}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("removing state version %d: %w", v.Index, err)
		}
	}
	return nil
}

// DeleteAll removes every version of obj's state (those labelled with its
// UID, after adopt).
func (s Store) DeleteAll(ctx context.Context, obj *v1alpha1.Terraform) error {
	versions, err := s.adopt(ctx, obj)
	if err != nil {
		return err
	}
	for _, v := range versions {
		if v.uid != string(obj.UID) {
			continue
		}
		if err := s.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: v.Secret}}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("removing state version %d: %w", v.Index, err)
		}
	}
	return nil
}

// List returns obj's kept versions, newest first (metadata only).
func List(ctx context.Context, c client.Reader, obj *v1alpha1.Terraform) ([]Version, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := c.List(ctx, list, client.InNamespace(obj.Namespace), client.MatchingLabels{Label: names.Label(obj.Name)}); err != nil {
		return nil, fmt.Errorf("listing state versions: %w", err)
	}
	var out []Version
	for _, m := range list.Items {
		v, ok := parse(m.Name, m.Annotations)
		if !ok {
			continue
		}
		v.uid = m.Labels[v1alpha1.OwnerUIDLabel]
		if v.uid != "" && v.uid != string(obj.UID) && m.Labels[v1alpha1.OwnerNameLabel] != names.Label(obj.Name) {
			continue
		}
		switch m.Name {
		case Name(obj, v.Index):
		case legacyName(obj, v.Index):
			v.legacy = true
		default:
			continue
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index > out[j].Index })
	return out, nil
}

// RecordedLimit is the limit the newest of versions was kept under (the
// controller's --state-history), for a Store outside the controller; when
// none is recorded, one that prunes nothing.
func RecordedLimit(versions []Version) int {
	if len(versions) > 0 && versions[0].Limit > 0 {
		return versions[0].Limit
	}
	return len(versions) + 1
}

// Data returns the state Secret data a version holds, verified against the
// digest recorded when it was kept.
func Data(ctx context.Context, c client.Reader, obj *v1alpha1.Terraform, v Version) (map[string][]byte, error) {
	var secret corev1.Secret
	err := c.Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: v.Secret}, &secret)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, v.Secret)
	}
	if err != nil {
		return nil, err
	}
	if got := digestOf(secret.Data); got != v.Digest {
		return nil, fmt.Errorf("state version %d (Secret %s) does not hold what was kept (digest %s, recorded %s): refusing it", v.Index, v.Secret, got, v.Digest)
	}
	return secret.Data, nil
}

// Name is the Secret of obj's version n: tfhistory-<object>-<n>, the
// object's name cut and hashed by names.Prefixed when too long. Injective:
// n has no '-', and no other name Landform derives starts with
// "tfhistory-" (internal/names' tests check every pair).
func Name(obj *v1alpha1.Terraform, n int) string {
	return names.Prefixed(secretPrefix, obj.Name, names.MaxName-maxIndexLen) + "-" + strconv.Itoa(n)
}

const (
	secretPrefix = "tfhistory-"
	// maxIndexLen leaves room for "-<n>" up to nine digits.
	maxIndexLen = 10
)

// legacyName is the name versions had before Name: <state Secret>-v<n>.
func legacyName(obj *v1alpha1.Terraform, n int) string {
	return names.StateSecret(obj) + "-v" + strconv.Itoa(n)
}

func labels(obj *v1alpha1.Terraform) map[string]string {
	l := owned.Labels(obj)
	l[Label] = names.Label(obj.Name)
	l[v1alpha1.OwnerUIDLabel] = string(obj.UID)
	return l
}

// adopt lists obj's versions and makes each one obj's under its current
// name: a version under its legacy name is copied to Name and the old
// Secret deleted; one labelled with an earlier object of the same name
// (deleted with deletionPolicy Orphan) is labelled with obj's UID. A
// legacy-named version whose bytes are no longer those kept has become
// another object's state Secret (an object named <name>-v<n> took it):
// it is released, not moved, and no longer listed.
func (s Store) adopt(ctx context.Context, obj *v1alpha1.Terraform) ([]Version, error) {
	versions, err := List(ctx, s.reader(), obj)
	if err != nil {
		return nil, err
	}
	out := versions[:0]
	for _, v := range versions {
		if !v.legacy && v.uid == string(obj.UID) {
			out = append(out, v)
			continue
		}
		var old corev1.Secret
		err := s.reader().Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: v.Secret}, &old)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading state version %d: %w", v.Index, err)
		}
		if digestOf(old.Data) != v.Digest {
			if err := s.release(ctx, &old); err != nil {
				return nil, err
			}
			continue
		}
		v.uid = string(obj.UID)
		if !v.legacy {
			patch := client.MergeFrom(old.DeepCopy())
			old.Labels[v1alpha1.OwnerUIDLabel] = v.uid
			if err := s.Client.Patch(ctx, &old, patch); err != nil {
				return nil, fmt.Errorf("adopting state version %d: %w", v.Index, err)
			}
			out = append(out, v)
			continue
		}
		moved := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: Name(obj, v.Index), Labels: labels(obj), Annotations: old.Annotations},
			Type:       old.Type,
			Data:       old.Data,
		}
		if err := s.Client.Create(ctx, moved); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("moving state version %d to Secret %s: %w", v.Index, moved.Name, err)
		}
		if err := s.Client.Delete(ctx, &old, client.Preconditions{UID: &old.UID, ResourceVersion: &old.ResourceVersion}); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("removing state version %d's old Secret %s: %w", v.Index, old.Name, err)
		}
		v.Secret, v.legacy = moved.Name, false
		out = append(out, v)
	}
	return out, nil
}

// release drops the version labels from a Secret that is a version no
// more, so that the object whose state it has become may claim it.
func (s Store) release(ctx context.Context, secret *corev1.Secret) error {
	patch := client.MergeFrom(secret.DeepCopy())
	for _, l := range []string{Label, v1alpha1.OwnerUIDLabel, v1alpha1.OwnerNameLabel, v1alpha1.ManagedByLabel} {
		delete(secret.Labels, l)
	}
	if err := s.Client.Patch(ctx, secret, patch); err != nil {
		return fmt.Errorf("releasing Secret %s, no longer a kept state version: %w", secret.Name, err)
	}
	return nil
}

func annotations(v Version) map[string]string {
	a := map[string]string{
		annIndex:    strconv.Itoa(v.Index),
		annDigest:   v.Digest,
		annKeptAt:   v.KeptAt.Format(time.RFC3339),
		annReason:   v.Why,
		annRevision: v.Revision,
	}
	if v.Limit > 0 {
		a[annLimit] = strconv.Itoa(v.Limit)
	}
	if v.Serial >= 0 {
		a[annSerial] = strconv.FormatInt(v.Serial, 10)
		a[annLineage] = v.Lineage
	}
	return a
}

func parse(name string, a map[string]string) (Version, bool) {
	index, err := strconv.Atoi(a[annIndex])
	if err != nil || index < 1 || a[annDigest] == "" {
		return Version{}, false
	}
	v := Version{Secret: name, Index: index, Serial: -1, Lineage: a[annLineage], Digest: a[annDigest], Why: a[annReason], Revision: a[annRevision]}
	if s, err := strconv.ParseInt(a[annSerial], 10, 64); err == nil {
		v.Serial = s
	}
	v.KeptAt, _ = time.Parse(time.RFC3339, a[annKeptAt])
	v.Limit, _ = strconv.Atoi(a[annLimit])
	return v, true
}

// facts is what Keep reads of a state (gzip'd JSON, as the backend keeps
// it), decoded once: its serial and lineage (-1 and "" for a state it
// cannot read, such as an encrypted one), and whether it holds nothing.
type facts struct {
	serial  int64
	lineage string
	// empty: no state, or one with neither resources nor outputs, what
	// the backend writes when a new object's first plan creates its
	// workspace. Keeping it would cost a Secret write and a list per new
	// object (measured by `make bench`: one of about 10 Secret writes per
	// object), and restoring it would only make Landform forget every
	// resource. An encrypted or unreadable state is not empty: what it
	// holds cannot be told.
	empty bool
}

func readFacts(gzipped []byte) facts {
	f := facts{serial: -1, empty: len(gzipped) == 0}
	raw, err := tfstate.Decompress(gzipped)
	if f.empty || err != nil {
		return f
	}
	var st struct {
		tfstate.Identity
		Resources []json.RawMessage          `json:"resources"`
		Outputs   map[string]json.RawMessage `json:"outputs"`
	}
	if json.Unmarshal(raw, &st) != nil || st.Lineage == "" {
		return f
	}
	f.serial, f.lineage = st.Serial, st.Lineage
	f.empty = len(st.Resources) == 0 && len(st.Outputs) == 0
	return f
}

// digestOf is the sha256 of a Secret's data, keys in order.
func digestOf(data map[string][]byte) string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%d:%s%d:", len(k), k, len(data[k]))
		h.Write(data[k])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Restore writes v back into obj's state Secret, under the state's lock
// (taken in the backend's own format, as who), after keeping the current
// state as a version so that the restore itself can be undone. It fails
// with *statelock.LockedError while anyone holds the lock: a run, a
// person's tofu. The state Secret is written only as it was read (its
// resourceVersion), so a write that came between fails.
func (s Store) Restore(ctx context.Context, leases coordinationv1client.LeaseInterface, obj *v1alpha1.Terraform, v Version, who string) (*Version, error) {
	data, err := Data(ctx, s.reader(), obj, v)
	if err != nil {
		return nil, err
	}
	lease := names.StateLease(obj)
	id, err := statelock.Acquire(ctx, leases, lease, statelock.Holder{Run: "restore by " + who}, "OperationTypeRestore")
	if err != nil {
		return nil, err
	}
	defer func() {
		// Released even when the caller's context ended.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = statelock.Release(rctx, leases, lease, id)
	}()
	kept, err := s.Keep(ctx, obj, fmt.Sprintf("restore of version %d", v.Index), "")
	if err != nil {
		return nil, err
	}
	var state corev1.Secret
	if err := s.reader().Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: names.StateSecret(obj)}, &state); err != nil {
		return nil, fmt.Errorf("reading state Secret %s: %w", names.StateSecret(obj), err)
	}
	state.Data = data
	if err := s.Client.Update(ctx, &state); err != nil {
		return nil, fmt.Errorf("writing state Secret %s: %w", names.StateSecret(obj), err)
	}
	return kept, nil
}
