package custody

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/tfstate"
)

// SnapshotRefusedError is a preview's target it may not take a snapshot
// of: Reason is the condition reason (CrossNamespaceRefDenied,
// PreviewTargetNotFound, PreviewBackendUnsupported).
type SnapshotRefusedError struct {
	Reason, Message string
}

func (e *SnapshotRefusedError) Error() string { return e.Message }

// Snapshot copies the state of preview's target (spec.preview.stateFrom)
// into preview's own state Secret, which preview owns (Claim), when it
// changed since the snapshot status records; preview's plans start from
// it. The target's Secret is only read and its Lease never touched: a
// snapshot takes no lock, so any number of previews plan while the target
// applies. A snapshot taken during the target's apply is a state that
// apply wrote; the apply's end changes the state again, and the preview
// plans again. Without a target the snapshot is an empty state.
func (k *Keeper) Snapshot(ctx context.Context, preview *v1alpha1.Terraform, recorded *v1alpha1.PreviewStatus, now time.Time) (*v1alpha1.PreviewStatus, error) {
	var target *v1alpha1.Terraform
	var data []byte
	if key := preview.PreviewTargetKey(); key != "" {
		var err error
		if target, err = k.previewTarget(ctx, preview, key); err != nil {
			return nil, err
		}
		if data, err = k.stateData(ctx, target.Namespace, names.StateSecret(target)); err != nil {
			return nil, err
		}
	}
	digest := fmt.Sprintf("sha256:%x", sha256.Sum256(data))
	st := &v1alpha1.PreviewStatus{Target: preview.PreviewTargetKey(), StateDigest: digest}
	if target != nil {
		st.TargetAppliedPlan = target.Status.LastAppliedPlan
	}
	if recorded != nil && recorded.Target == st.Target && recorded.StateDigest == digest {
		mine, err := k.stateData(ctx, preview.Namespace, names.StateSecret(preview))
		if err != nil {
			return nil, err
		}
		if bytes.Equal(mine, data) {
			return recorded, nil
		}
	}
	if len(data) > 0 {
		raw, err := tfstate.Decompress(data)
		if err != nil {
			return nil, fmt.Errorf("reading the state of Terraform %s: %w", st.Target, err)
		}
		// An OpenTofu-encrypted state keeps its identity in clear; one
		// this cannot read is still copied, and the engine reads it.
		if id, err := tfstate.ReadIdentity(raw); err == nil {
			st.StateSerial, st.StateLineage = id.Serial, id.Lineage
		}
	}
	if err := k.writeState(ctx, preview, data); err != nil {
		return nil, err
	}
	at := metav1.NewTime(now)
	st.SnapshotAt = &at
	return st, nil
}

// previewTarget is the Terraform object key names, if preview may take a
// snapshot of its state.
func (k *Keeper) previewTarget(ctx context.Context, preview *v1alpha1.Terraform, key string) (*v1alpha1.Terraform, error) {
	ns, name, _ := strings.Cut(key, "/")
	if ns != preview.Namespace {
		granted, err := k.grants(ctx, ns, preview.Namespace)
		if err != nil {
			return nil, err
		}
		if !granted {
			return nil, &SnapshotRefusedError{Reason: v1alpha1.CrossNamespaceRefDeniedReason, Message: fmt.Sprintf(
				"spec.preview.stateFrom names Terraform %s in another namespace, which does not grant previews from %s a snapshot of its states: a namespace's owner grants it with `kubectl label namespace %s %s=%s`",
				key, preview.Namespace, ns, v1alpha1.PreviewsFromLabel, preview.Namespace)}
		}
	}
	target, err := k.object(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	if target == nil {
		return nil, &SnapshotRefusedError{Reason: v1alpha1.PreviewTargetNotFoundReason, Message: fmt.Sprintf(
			"spec.preview.stateFrom names Terraform %s, which does not exist; the preview plans once it does", key)}
	}
	if CustomBackend(target) {
		return nil, &SnapshotRefusedError{Reason: v1alpha1.PreviewBackendUnsupportedReason, Message: fmt.Sprintf(
			"Terraform %s keeps its state in a custom backend (spec.backendConfig.customConfiguration), which Landform cannot take a snapshot of; a preview plans against the default kubernetes backend only", key)}
	}
	return target, nil
}

// grants reports whether namespace lets previews in from take snapshots
// of its states (PreviewsFromLabel).
func (k *Keeper) grants(ctx context.Context, namespace, from string) (bool, error) {
	labels, err := k.namespaceLabels(ctx, namespace)
	return labels[v1alpha1.PreviewsFromLabel] == from, err
}

// PreviewOnly reports whether namespace admits only previews
// (PreviewOnlyLabel).
func (k *Keeper) PreviewOnly(ctx context.Context, namespace string) (bool, error) {
	labels, err := k.namespaceLabels(ctx, namespace)
	return labels[v1alpha1.PreviewOnlyLabel] == "true", err
}

// namespaceLabels are a namespace's labels; none when it is gone.
func (k *Keeper) namespaceLabels(ctx context.Context, namespace string) (map[string]string, error) {
	ns, err := k.namespace(ctx, namespace)
	if ns == nil {
		return nil, err
	}
	return ns.Labels, nil
}

// stateData is the state a state Secret holds; nil for none.
func (k *Keeper) stateData(ctx context.Context, namespace, name string) ([]byte, error) {
	var s corev1.Secret
	err := k.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the state Secret %s/%s: %w", namespace, name, err)
	}
	return s.Data[tfstate.DataKey], nil
}

// writeState makes data the state in preview's own state Secret (which
// Claim made).
func (k *Keeper) writeState(ctx context.Context, preview *v1alpha1.Terraform, data []byte) error {
	var s corev1.Secret
	key := client.ObjectKey{Namespace: preview.Namespace, Name: names.StateSecret(preview)}
	if err := k.Reader.Get(ctx, key, &s); err != nil {
		return fmt.Errorf("reading the preview's state Secret %s: %w", key.Name, err)
	}
	if s.Labels[v1alpha1.OwnerUIDLabel] != string(preview.UID) {
		return fmt.Errorf("state Secret %s is not this preview's", key.Name)
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	if len(data) == 0 {
		delete(s.Data, tfstate.DataKey)
	} else {
		s.Data[tfstate.DataKey] = data
	}
	if err := k.Client.Update(ctx, &s); err != nil {
		return fmt.Errorf("writing the snapshot into the preview's state Secret %s: %w", key.Name, err)
	}
	return nil
}
