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
	applied, _ := strconv.ParseBool(a[annApplied])
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

// MarkApplied records that plan id was applied. It fails with ErrNotFound
// when the stored plan is another one, and with a conflict when a Save
// races it, so a new plan is never marked applied by mistake.
func (s Store) MarkApplied(ctx context.Context, owner *v1alpha1.Terraform, id string) error {
	store := s.chunks()
	b, err := store.Stat(ctx, owner)
	if err != nil {
		return notFound(owner, nil, err)
	}
	p, err := meta(owner, b)
	if err != nil {
		return err
	}
	if p.ID != id {
		return fmt.Errorf("%w: %s/%s's stored plan is %s, not %s", ErrNotFound, owner.Namespace, owner.Name, p.ID, id)
	}
	if p.Applied {
		return nil
	}
	if err := store.Annotate(ctx, owner, b, map[string]string{annApplied: "true"}); err != nil {
		return fmt.Errorf("marking plan %s of %s/%s applied: %w", id, owner.Namespace, owner.Name, err)
	}
	return nil
}
