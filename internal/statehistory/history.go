// Package statehistory keeps the last few versions of a Terraform object's
// state (the default backend's state Secret), so that a person can roll
// back a bad apply or a corrupted state: the controller keeps the state as
// it is before every apply and destroy, `landform state history` lists the
// versions and `landform state restore` writes one back.
//
// A version is a Secret <state Secret>-v<n> in the object's namespace,
// holding the state Secret's data byte for byte (gzip'd JSON as the
// kubernetes backend writes it: an OpenTofu encrypted state stays exactly
// as encrypted), labelled as the object's and annotated with its serial
// and lineage when the state is plain. n grows by one per version; beyond
// the limit the oldest go. Versions carry no owner reference, like the
// state Secret itself: deletionPolicy Orphan keeps them with the state,
// Delete removes them with it.
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
	versions, err := List(ctx, s.reader(), obj)
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
	v := Version{Index: next, Serial: -1, Digest: digest, KeptAt: time.Now().UTC().Truncate(time.Second), Why: why, Revision: revision}
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

// prune deletes the versions beyond the limit, newest first as given.
func (s Store) prune(ctx context.Context, obj *v1alpha1.Terraform, versions []Version) error {
	for _, v := range versions[min(len(versions), s.limit()):] {
		if err := s.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: v.Secret}}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("removing state version %d: %w", v.Index, err)
		}
	}
	return nil
}

// DeleteAll removes every version of obj's state.
func (s Store) DeleteAll(ctx context.Context, obj *v1alpha1.Terraform) error {
	versions, err := List(ctx, s.reader(), obj)
	if err != nil {
		return err
	}
	for _, v := range versions {
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
		if ok && m.Name == Name(obj, v.Index) {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index > out[j].Index })
	return out, nil
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

// Name is the Secret of obj's version n.
func Name(obj *v1alpha1.Terraform, n int) string {
	return names.StateSecret(obj) + "-v" + strconv.Itoa(n)
}

func labels(obj *v1alpha1.Terraform) map[string]string {
	l := owned.Labels(obj)
	l[Label] = names.Label(obj.Name)
	return l
}

func annotations(v Version) map[string]string {
	a := map[string]string{
		annIndex:    strconv.Itoa(v.Index),
		annDigest:   v.Digest,
		annKeptAt:   v.KeptAt.Format(time.RFC3339),
		annReason:   v.Why,
		annRevision: v.Revision,
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
