// Package unsavedstate keeps a state the engine could not write to the
// backend (its errored.tfstate), in Secrets of the object's namespace
// (tfunsaved-<name>-<i>, owned by the object), until it is written:
// the runner hands it over while it still retries, so that it outlives a
// runner that dies or gives up. Push writes it to the kubernetes
// backend's state Secret under the state lock, as the runner does; the
// controller does so before any run, and `landform state push` when a
// person must decide.
//
// The bytes are the state as the engine wrote it: with OpenTofu state
// encryption, as encrypted as the state in the backend.
package unsavedstate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/chunkstore"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/tfstate"
)

// Labels, annotations and the type of the Secrets.
const (
	// Label marks the Secrets of unsaved states.
	Label = "infra.landform.dev/unsaved-state"
	// SecretType is the type of those Secrets.
	SecretType = "infra.landform.dev/unsaved-state"

	// annPrefix-digest, -chunks and -chunk are the layout's annotations.
	annPrefix  = "infra.landform.dev/unsaved-state"
	annRun     = annPrefix + "-run"
	annSerial  = annPrefix + "-serial"
	annLineage = annPrefix + "-lineage"
	annKept    = annPrefix + "-kept"
	// annOf names the state Secret the state was kept for.
	annOf = annPrefix + "-of"

	dataKey    = "tfstate"
	fieldOwner = "landform-unsavedstate"
)

var layout = chunkstore.Layout{Kind: "tfunsaved", What: "unsaved state", Type: SecretType, DataKey: dataKey, FieldOwner: fieldOwner}.AnnotatedAs(annPrefix)

// legacyLayout is where unsaved states were kept before:
// tfstate-unsaved-<name>-<i>, which is also what the kubernetes backend
// names the state of an object in a workspace "unsaved…". A state kept
// there before an upgrade is still found, pushed and forgotten; nothing is
// written there any more, and chunkstore touches only Secrets the object
// owns.
var legacyLayout = func() chunkstore.Layout { l := layout; l.Kind = "tfstate-unsaved"; return l }()

// SecretName is the Secret that holds owner's unsaved state (its first
// chunk, the only one of a state under 512 KiB).
func SecretName(owner *v1alpha1.Terraform) string { return layout.ChunkName(owner.Name, 0) }

// ChunkName names chunk i of owner's unsaved state.
func ChunkName(owner *v1alpha1.Terraform, i int) string { return layout.ChunkName(owner.Name, i) }

// Store keeps one unsaved state per Terraform object. Give it a client
// that reads Secrets from the API server.
type Store struct {
	Client client.Client
	// NoLegacy, when set, remembers the objects found with no state in
	// the legacy layout: nothing is written there any more, so one look
	// per object and process is enough, and the controller, which looks
	// before every run, reads one Secret less per run. Nil: look each
	// time.
	//
	// Whether a state is kept under the current name is read at every
	// look, never remembered: not only the controller's runs keep one,
	// `landform state push --file` does too (a state a local runner left
	// on disk), and the controller must find it before its next run, or
	// that run would plan from the backend's older state.
	NoLegacy *sync.Map
}

// noLegacyKey is owner's key in NoLegacy.
func noLegacyKey(owner *v1alpha1.Terraform) string { return noLegacyPrefix + string(owner.UID) }

// noLegacyPrefix begins the keys Store puts in NoLegacy, so that a map
// shared with others can tell them apart.
const noLegacyPrefix = "unsaved-no-legacy/"

// ObjectGone drops what NoLegacy remembers of owner, whose deletion is
// done: the map would otherwise keep an entry for every object that ever
// lived.
func (s Store) ObjectGone(owner *v1alpha1.Terraform) {
	if s.NoLegacy != nil {
		s.NoLegacy.Delete(noLegacyKey(owner))
	}
}

func (s Store) chunks() chunkstore.Store { return chunkstore.Store{Client: s.Client, Layout: layout} }

// held returns the store holding owner's unsaved state, the current
// layout's or else the legacy one's, and its index; a nil index when none
// is kept.
func (s Store) held(ctx context.Context, owner *v1alpha1.Terraform) (chunkstore.Store, *chunkstore.Blob, error) {
	for _, l := range []chunkstore.Layout{layout, legacyLayout} {
		legacy := l.Kind == legacyLayout.Kind && s.NoLegacy != nil
		if legacy {
			if _, none := s.NoLegacy.Load(noLegacyKey(owner)); none {
				continue
			}
		}
		cs := chunkstore.Store{Client: s.Client, Layout: l}
		b, err := cs.Stat(ctx, owner)
		if errors.Is(err, chunkstore.ErrNotFound) {
			if legacy {
				s.NoLegacy.Store(noLegacyKey(owner), struct{}{})
			}
			continue
		}
		return cs, b, err
	}
	return chunkstore.Store{}, nil, nil
}

// State is a kept unsaved state.
type State struct {
	// Data is the state as the engine wrote it; nil from Stat.
	Data   []byte
	Digest digest.Digest
	// Run is the run whose apply or destroy could not save it.
	Run string
	// Identity is the state's serial and lineage, when readable.
	Identity tfstate.Identity
	// Kept is when Landform kept it.
	Kept time.Time
	// Of is the state Secret it was kept for; empty for a state kept
	// before Landform recorded it.
	Of string
}

// ElsewhereError: the kept state is of another state Secret than the
// one its object uses now (spec.workspace or backendConfig.secretSuffix
// changed since), and is written into neither.
type ElsewhereError struct {
	// Kept is the Secret keeping it, Of the state Secret it is of, Now
	// the one the object uses.
	Kept, Of, Now string
}

func (e *ElsewhereError) Error() string {
	return fmt.Sprintf("it is the state of Secret %s, but the object now uses %s (spec.workspace or spec.backendConfig.secretSuffix changed since): "+
		"set them back, and the next run writes it; or write it into %s yourself (`tofu state push`, in that workspace) and delete Secret %s",
		e.Of, e.Now, e.Of, e.Kept)
}

// Keep keeps data, the state run could not save, as owner's unsaved
// state, replacing any kept before (an older one: the engine wrote this
// one after it).
func (s Store) Keep(ctx context.Context, owner *v1alpha1.Terraform, run string, data []byte, now time.Time) (digest.Digest, error) {
	ann := map[string]string{annRun: run, annKept: now.UTC().Format(time.RFC3339), annOf: names.StateSecret(owner)}
	if id, err := tfstate.ReadIdentity(data); err == nil {
		ann[annSerial] = strconv.FormatInt(id.Serial, 10)
		ann[annLineage] = id.Lineage
	}
	d, err := s.chunks().Write(ctx, owner, chunkstore.Blob{Data: data, Labels: map[string]string{Label: "true"}, Annotations: ann})
	if err != nil {
		return "", err
	}
	// One kept per object: an older one under the legacy name goes.
	return d, chunkstore.Store{Client: s.Client, Layout: legacyLayout}.Delete(ctx, owner)
}

// Stat returns owner's unsaved state without its bytes; nil when none is
// kept.
func (s Store) Stat(ctx context.Context, owner *v1alpha1.Terraform) (*State, error) {
	_, b, err := s.held(ctx, owner)
	if b == nil || err != nil {
		return nil, err
	}
	return stateOf(b), nil
}

// Read returns owner's unsaved state, its bytes checked against the digest
// its index records; nil when none is kept. A set of chunks that does not
// hold one intact state is an error: it may be a Keep cut short.
func (s Store) Read(ctx context.Context, owner *v1alpha1.Terraform) (*State, error) {
	cs, index, err := s.held(ctx, owner)
	if index == nil || err != nil {
		return nil, err
	}
	b, err := cs.Read(ctx, owner, "")
	if err != nil {
		return nil, fmt.Errorf("reading the unsaved state of %s/%s (Secret %s): %w", owner.Namespace, owner.Name, cs.Layout.ChunkName(owner.Name, 0), err)
	}
	st := stateOf(b)
	st.Data = b.Data
	return st, nil
}

func stateOf(b *chunkstore.Blob) *State {
	st := &State{Digest: b.Digest, Run: b.Annotations[annRun]}
	st.Identity.Lineage = b.Annotations[annLineage]
	st.Identity.Serial, _ = strconv.ParseInt(b.Annotations[annSerial], 10, 64)
	st.Kept, _ = time.Parse(time.RFC3339, b.Annotations[annKept])
	st.Of = b.Annotations[annOf]
	return st
}

// Forget deletes owner's unsaved state if it is the one of digest d (a
// newer one stays). It succeeds when none is kept.
func (s Store) Forget(ctx context.Context, owner *v1alpha1.Terraform, d digest.Digest) error {
	cs, b, err := s.held(ctx, owner)
	if b == nil || err != nil {
		return err
	}
	if b.Digest != d {
		return nil
	}
	return cs.Delete(ctx, owner)
}

// Backend is the kubernetes backend's state of an object: its Secret and
// its lock Lease, in the object's namespace.
type Backend struct {
	Secrets corev1client.SecretInterface
	Leases  coordinationv1client.LeaseInterface
}

// Pushed is a kept state written to the backend.
type Pushed struct {
	*State
	// Previous is the backend's state it replaced.
	Previous tfstate.Identity
	// Written is false when the backend held it already.
	Written bool
}

// Push writes owner's unsaved state into its kubernetes backend's state
// Secret (see tfstate.Push) under the state lock, taken as holder, and
// forgets it once written; nil when none is kept. A lock held by anyone
// else fails with *statelock.LockedError; a state the backend's may not
// be replaced with (another lineage, a newer serial) with a
// *tfstate.RefusedError, unless force; a state kept for another state
// Secret than the object's now with an *ElsewhereError, even with force.
func (s Store) Push(ctx context.Context, owner *v1alpha1.Terraform, b Backend, holder statelock.Holder, force bool) (*Pushed, error) {
	st, err := s.Read(ctx, owner)
	if st == nil || err != nil {
		return nil, err
	}
	secret := names.StateSecret(owner)
	if st.Of != "" && st.Of != secret {
		// Written there, it would describe resources of another state
		// (and a seeded new one takes any lineage).
		return nil, &ElsewhereError{Kept: SecretName(owner), Of: st.Of, Now: secret}
	}
	lease := statelock.LeaseName(secret)
	id, err := statelock.Acquire(ctx, b.Leases, lease, holder, statelock.OperationApply)
	if err != nil {
		return nil, err
	}
	res, err := tfstate.Push(ctx, b.Secrets, secret, st.Data, tfstate.PushOptions{Force: force})
	// Released on a context of its own: a lock left behind blocks every
	// run.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if rerr := statelock.Release(rctx, b.Leases, lease, id); rerr != nil && err == nil {
		err = fmt.Errorf("releasing the state lock %s after writing the state: %w", id, rerr)
	}
	if err != nil {
		return nil, err
	}
	if err := s.Forget(ctx, owner, st.Digest); err != nil {
		return nil, fmt.Errorf("the state is written; forgetting its copy in Secret %s: %w", SecretName(owner), err)
	}
	return &Pushed{State: st, Previous: res.Previous, Written: res.Written}, nil
}
