package planstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// index is what chunk 0's annotations say about the stored plan.
type index struct {
	meta   Plan
	chunks int
	sha256 string
}

// getIndex reads chunk 0 and its index annotations.
func (s Store) getIndex(ctx context.Context, owner *v1alpha1.Terraform) (*corev1.Secret, *index, error) {
	name := chunkName(owner.Name, 0)
	var secret corev1.Secret
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: owner.Namespace, Name: name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("%w: %s/%s has no plan (Secret %s does not exist)", ErrNotFound, owner.Namespace, owner.Name, name)
		}
		return nil, nil, fmt.Errorf("reading plan Secret %s/%s: %w", owner.Namespace, name, err)
	}
	idx, ok := parseIndex(&secret)
	if !ok {
		return nil, nil, fmt.Errorf("%w: plan Secret %s/%s has no valid index annotations", ErrNotFound, owner.Namespace, name)
	}
	return &secret, idx, nil
}

// parseIndex reads the index annotations of chunk 0; false when they are
// missing or invalid.
func parseIndex(secret *corev1.Secret) (*index, bool) {
	a := secret.Annotations
	chunks, err := strconv.Atoi(a[annChunks])
	if err != nil || chunks < 1 || a[annID] == "" || a[annSHA256] == "" {
		return nil, false
	}
	applied, _ := strconv.ParseBool(a[annApplied])
	return &index{
		meta: Plan{
			ID:           a[annID],
			Revision:     a[annRevision],
			InputsDigest: a[annInputs],
			Applied:      applied,
			Digest:       digestPrefix + a[annSHA256],
		},
		chunks: chunks,
		sha256: a[annSHA256],
	}, true
}

// LoadMeta returns owner's stored plan's ID, Revision, InputsDigest and
// Applied, reading only the index.
func (s Store) LoadMeta(ctx context.Context, owner *v1alpha1.Terraform) (*Plan, error) {
	_, idx, err := s.getIndex(ctx, owner)
	if err != nil {
		return nil, err
	}
	return &idx.meta, nil
}

// Load returns owner's stored plan after checking that every chunk belongs
// to it and that the reassembled payload has the recorded digest.
func (s Store) Load(ctx context.Context, owner *v1alpha1.Terraform) (*Plan, error) {
	first, idx, err := s.getIndex(ctx, owner)
	if err != nil {
		return nil, err
	}
	notFound := func(format string, args ...any) error {
		return fmt.Errorf("%w: plan %s of %s/%s: %s", ErrNotFound, idx.meta.ID, owner.Namespace, owner.Name, fmt.Sprintf(format, args...))
	}
	var payload bytes.Buffer
	payload.Write(first.Data[dataKey])
	for i := 1; i < idx.chunks; i++ {
		name := chunkName(owner.Name, i)
		var secret corev1.Secret
		if err := s.Client.Get(ctx, client.ObjectKey{Namespace: owner.Namespace, Name: name}, &secret); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, notFound("chunk %d of %d (Secret %s) is missing", i, idx.chunks, name)
			}
			return nil, fmt.Errorf("reading plan Secret %s/%s: %w", owner.Namespace, name, err)
		}
		// A chunk of another plan means a Save is under way or was cut short.
		if secret.Annotations[annSHA256] != idx.sha256 || secret.Annotations[annChunk] != strconv.Itoa(i) {
			return nil, notFound("chunk %d of %d (Secret %s) belongs to another plan", i, idx.chunks, name)
		}
		payload.Write(secret.Data[dataKey])
	}
	sum := sha256.Sum256(payload.Bytes())
	if hex.EncodeToString(sum[:]) != idx.sha256 {
		return nil, notFound("the reassembled payload does not match its recorded sha256")
	}
	p := idx.meta
	if err := decode(payload.Bytes(), &p); err != nil {
		return nil, notFound("decoding: %v", err)
	}
	return &p, nil
}

// MarkApplied records that plan id was applied. It fails with ErrNotFound
// when the stored plan is another one, and with a conflict when a Save
// races it, so a new plan is never marked applied by mistake.
func (s Store) MarkApplied(ctx context.Context, owner *v1alpha1.Terraform, id string) error {
	secret, idx, err := s.getIndex(ctx, owner)
	if err != nil {
		return err
	}
	if idx.meta.ID != id {
		return fmt.Errorf("%w: %s/%s's stored plan is %s, not %s", ErrNotFound, owner.Namespace, owner.Name, idx.meta.ID, id)
	}
	if idx.meta.Applied {
		return nil
	}
	patch := client.MergeFromWithOptions(secret.DeepCopy(), client.MergeFromWithOptimisticLock{})
	secret.Annotations[annApplied] = "true"
	if err := s.Client.Patch(ctx, secret, patch, client.FieldOwner(fieldOwner+"-applied")); err != nil {
		return fmt.Errorf("marking plan %s of %s/%s applied: %w", id, owner.Namespace, owner.Name, err)
	}
	return nil
}
