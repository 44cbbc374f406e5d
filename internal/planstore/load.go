package planstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/chunkstore"
)

// notFound says ErrNotFound, naming the plan when its index was read,
// for a plan the chunk store has no intact copy of.
func notFound(owner *v1alpha1.Terraform, b *chunkstore.Blob, err error) error {
	if !errors.Is(err, chunkstore.ErrNotFound) && !errors.Is(err, chunkstore.ErrDigestMismatch) {
		return err
	}
	if b != nil && b.Annotations[annID] != "" {
		return fmt.Errorf("%w: plan %s of %s/%s: %w", ErrNotFound, b.Annotations[annID], owner.Namespace, owner.Name, err)
	}
	return fmt.Errorf("%w: %s/%s has no plan: %w", ErrNotFound, owner.Namespace, owner.Name, err)
}

// meta reads what the index says about the stored plan: its ID,
// Revision, InputsDigest, Applied and Digest.
func meta(owner *v1alpha1.Terraform, b *chunkstore.Blob) (*Plan, error) {
	a := b.Annotations
	if a[annID] == "" {
		return nil, fmt.Errorf("%w: plan Secret %s/%s has no valid index annotations", ErrNotFound, owner.Namespace, layout.ChunkName(owner.Name, 0))
	}
	// A plan is applied when its owner's status says so
	// (status.lastAppliedPlan): the status write that records an apply
	// is made anyway, so the plan Secret needs no write of its own. No
	// later plan is taken for the applied one: a plan's id covers the
	// plan applied before it, so it never repeats an applied plan's. The
	// annotation is read for plans that earlier versions marked.
	applied, _ := strconv.ParseBool(a[annApplied])
	applied = applied || (owner.Status.LastAppliedPlan != "" && owner.Status.LastAppliedPlan == a[annID])
	return &Plan{
		ID:           a[annID],
		Revision:     a[annRevision],
		InputsDigest: a[annInputs],
		Applied:      applied,
		Digest:       b.Digest.String(),
	}, nil
}

// LoadMeta returns owner's stored plan's ID, Revision, InputsDigest,
// Applied and Digest, reading only the index's metadata.
func (s Store) LoadMeta(ctx context.Context, owner *v1alpha1.Terraform) (*Plan, error) {
	b, err := s.chunks().Stat(ctx, owner)
	if err != nil {
		return nil, notFound(owner, nil, err)
	}
	return meta(owner, b)
}

// Load returns owner's stored plan after checking that every chunk belongs
// to it and that the reassembled payload has the recorded digest.
func (s Store) Load(ctx context.Context, owner *v1alpha1.Terraform) (*Plan, error) {
	b, err := s.chunks().Read(ctx, owner, "")
	if err != nil {
		return nil, notFound(owner, b, err)
	}
	p, err := meta(owner, b)
	if err != nil {
		return nil, err
	}
	if err := decode(b.Data, p); err != nil {
		return nil, fmt.Errorf("%w: plan %s of %s/%s: decoding: %v", ErrNotFound, p.ID, owner.Namespace, owner.Name, err)
	}
	return p, nil
}
