package planstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/owned"
)

// Save stores p as owner's plan, replacing the previous one, and sets
// p.Digest. The payload is
// split across Secrets tfplan-<owner>-<i>. Chunk 0 carries the index (plan
// id, chunk count, payload digest) and is written after all the others, so
// a reader finds either the old plan, the new one, or (mid-write) a set
// whose digests disagree, which Load reports as ErrNotFound.
func (s Store) Save(ctx context.Context, owner *v1alpha1.Terraform, p *Plan) error {
	payload, err := encode(p)
	if err != nil {
		return fmt.Errorf("encoding plan %s: %w", p.ID, err)
	}
	prev, err := s.storedChunks(ctx, owner)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(payload)
	digest := hex.EncodeToString(sum[:])
	n := max(1, (len(payload)+chunkSize-1)/chunkSize)

	labels := owned.Labels(owner)
	labels[PlanLabel] = owned.LabelValue(p.ID)
	chunk := func(i int) *corev1ac.SecretApplyConfiguration {
		end := min(len(payload), (i+1)*chunkSize)
		return corev1ac.Secret(chunkName(owner.Name, i), owner.Namespace).
			WithType(SecretType).
			WithLabels(labels).
			WithAnnotations(map[string]string{
				annID:     p.ID,
				annSHA256: digest,
				annChunk:  strconv.Itoa(i),
			}).
			WithOwnerReferences(owned.Reference(owner)).
			WithData(map[string][]byte{dataKey: payload[i*chunkSize : end]})
	}
	for i := 1; i < n; i++ {
		if err := s.apply(ctx, chunk(i)); err != nil {
			return fmt.Errorf("storing chunk %d of %d of plan %s: %w", i, n, p.ID, err)
		}
	}
	index := chunk(0).WithAnnotations(map[string]string{
		annRevision: p.Revision,
		annInputs:   p.InputsDigest,
		annChunks:   strconv.Itoa(n),
		annApplied:  strconv.FormatBool(p.Applied),
	})
	if err := s.apply(ctx, index); err != nil {
		return fmt.Errorf("storing the index of plan %s: %w", p.ID, err)
	}
	if err := s.removeChunksAbove(ctx, owner, n, prev); err != nil {
		return fmt.Errorf("removing chunks left by the previous plan of %s/%s: %w", owner.Namespace, owner.Name, err)
	}
	p.Digest = digestPrefix + digest
	return nil
}

// storedChunks is how many chunks the stored plan's index names: 0 when
// there is no index (a first plan; chunks of a save cut short before its
// index are overwritten by the next save, or go with the plan's deletion),
// -1 when the index is unreadable and the chunks must be listed.
func (s Store) storedChunks(ctx context.Context, owner *v1alpha1.Terraform) (int, error) {
	var secret corev1.Secret
	err := s.Client.Get(ctx, client.ObjectKey{Namespace: owner.Namespace, Name: chunkName(owner.Name, 0)}, &secret)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the index of the stored plan of %s/%s: %w", owner.Namespace, owner.Name, err)
	}
	idx, ok := parseIndex(&secret)
	if !ok {
		return -1, nil
	}
	return idx.chunks, nil
}

// removeChunksAbove deletes the chunks from n up to prev by name, without
// listing the namespace's Secrets; prev -1 (unknown) lists them.
func (s Store) removeChunksAbove(ctx context.Context, owner *v1alpha1.Terraform, n, prev int) error {
	if prev < 0 {
		return s.deleteChunks(ctx, owner, n)
	}
	var errs []error
	for i := n; i < prev; i++ {
		doomed := &corev1.Secret{}
		doomed.Namespace, doomed.Name = owner.Namespace, chunkName(owner.Name, i)
		if err := s.Client.Delete(ctx, doomed); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s Store) apply(ctx context.Context, secret *corev1ac.SecretApplyConfiguration) error {
	return s.Client.Apply(ctx, secret, client.FieldOwner(fieldOwner), client.ForceOwnership)
}

// Delete removes owner's stored plan. It succeeds when there is none.
func (s Store) Delete(ctx context.Context, owner *v1alpha1.Terraform) error {
	if err := s.deleteChunks(ctx, owner, 0); err != nil {
		return fmt.Errorf("deleting the plan of %s/%s: %w", owner.Namespace, owner.Name, err)
	}
	return nil
}

// deleteChunks deletes owner's plan chunks numbered from and above,
// lowest first so that the index goes before the data it describes.
func (s Store) deleteChunks(ctx context.Context, owner *v1alpha1.Terraform, from int) error {
	var list corev1.SecretList
	if err := s.Client.List(ctx, &list, client.InNamespace(owner.Namespace), client.MatchingLabels(owned.Labels(owner))); err != nil {
		return err
	}
	doomed := map[int]*corev1.Secret{}
	for i := range list.Items {
		if idx, ok := chunkIndex(owner.Name, list.Items[i].Name); ok && idx >= from {
			doomed[idx] = &list.Items[i]
		}
	}
	var errs []error
	for _, idx := range slices.Sorted(maps.Keys(doomed)) {
		if err := s.Client.Delete(ctx, doomed[idx]); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
