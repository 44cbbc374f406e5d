package planstore

import (
	"context"
	"fmt"
	"strconv"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/chunkstore"
	"github.com/landform-dev/landform/internal/names"
)

// Save stores p as owner's plan, replacing the previous one, and sets
// p.Digest. A reader finds either the old plan, the new one, or (mid-write)
// a set whose digests disagree, which Load reports as ErrNotFound.
func (s Store) Save(ctx context.Context, owner *v1alpha1.Terraform, p *Plan) error {
	payload, err := encode(p)
	if err != nil {
		return fmt.Errorf("encoding plan %s: %w", p.ID, err)
	}
	d, err := s.chunks().Write(ctx, owner, chunkstore.Blob{
		Data:   payload,
		Labels: map[string]string{PlanLabel: names.Label(p.ID)},
		Annotations: map[string]string{
			annID:       p.ID,
			annRevision: p.Revision,
			annInputs:   p.InputsDigest,
			annApplied:  strconv.FormatBool(p.Applied),
		},
	})
	if err != nil {
		return fmt.Errorf("storing plan %s: %w", p.ID, err)
	}
	p.Digest = d.String()
	return nil
}

// Delete removes owner's stored plan. It succeeds when there is none.
func (s Store) Delete(ctx context.Context, owner *v1alpha1.Terraform) error {
	return s.chunks().Delete(ctx, owner)
}
