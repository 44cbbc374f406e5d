package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/metrics"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/outcome"
	"github.com/landform-dev/landform/internal/outputs"
	"github.com/landform-dev/landform/internal/runs"
	"github.com/landform-dev/landform/internal/tfstate"
	"github.com/landform-dev/landform/runner"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// writeOutputs lists output names in status and writes the selected outputs
// into the Secret. Values, sensitive or not, only ever go into the Secret.
// Written, it tells nothing: an apply's Applied event says what it wrote,
// and refreshOutputs tells its own (tellOutputs).
func (r *TerraformReconciler) writeOutputs(ctx context.Context, obj *infrav1.Terraform, outs []*runnerpb.Output) error {
	converted := make([]outputs.Output, 0, len(outs))
	for _, o := range outs {
		converted = append(converted, outputs.Output{Name: o.GetName(), Value: o.GetValueJson(), Sensitive: o.GetSensitive()})
	}
	obj.Status.AvailableOutputs = outputs.Names(converted)

	spec := obj.Spec.WriteOutputsToSecret
	if spec == nil {
		conditions.MarkTrue(obj, infrav1.OutputsWrittenCondition, infrav1.OutputsWrittenReason, "outputs available; no writeOutputsToSecret configured")
		return nil
	}
	data, err := outputs.SecretData(converted, spec.Outputs)
	if err != nil {
		conditions.MarkFalse(obj, infrav1.OutputsWrittenCondition, infrav1.OutputsFailedReason, "%v", err)
		return outcome.Stalling(infrav1.OutputsFailedReason, "writeOutputsToSecret: %v; fix spec.writeOutputsToSecret.outputs", err)
	}
	if err := outputs.Write(ctx, r.Client, obj, *spec, data); err != nil {
		reason := infrav1.OutputsFailedReason
		if errors.Is(err, outputs.ErrNotOwned) {
			reason = infrav1.OutputSecretConflictReason
		}
		conditions.MarkFalse(obj, infrav1.OutputsWrittenCondition, reason, "%v", err)
		r.report.Event(obj, obj.Status.LastAppliedRevision, corev1.EventTypeWarning, reason, "writing outputs: %v", err)
		return outcome.Retry(reason, "%v", err)
	}
	conditions.MarkTrue(obj, infrav1.OutputsWrittenCondition, infrav1.OutputsWrittenReason, "wrote %d outputs to Secret %s", len(data), spec.Name)
	return nil
}

// tellOutputs is writeOutputs for outputs written without an apply, with
// an OutputsWritten event of their own.
func (r *TerraformReconciler) tellOutputs(ctx context.Context, obj *infrav1.Terraform, outs []*runnerpb.Output) error {
	if err := r.writeOutputs(ctx, obj, outs); err != nil {
		return err
	}
	if obj.Spec.WriteOutputsToSecret != nil {
		r.report.Event(obj, obj.Status.LastAppliedRevision, corev1.EventTypeNormal, infrav1.OutputsWrittenReason, "%s", conditions.GetMessage(obj, infrav1.OutputsWrittenCondition))
	}
	return nil
}

// mayHoldReference reports whether obj's outputs Secret may still carry
// obj's owner reference: only a Secret obj wrote can, and each write sets
// OutputsWritten. One written at this generation (deletionPolicy Orphan
// already) carries none: a write under Orphan leaves the reference out,
// and server-side apply removes one the write before had set. So a new
// object, and one that wrote since the switch, read nothing to release
// (the API server's audit log showed a read on every reconcile until the
// generation was observed).
func mayHoldReference(obj *infrav1.Terraform) bool {
	c := conditions.Get(obj, infrav1.OutputsWrittenCondition)
	if c == nil {
		return false
	}
	return c.Status != metav1.ConditionTrue || c.Reason != infrav1.OutputsWrittenReason || c.ObservedGeneration != obj.Generation
}

// checkOutputsSecret refuses, before a plan or an apply, an outputs Secret
// that belongs to someone else (another Terraform object, or a Secret
// Landform did not create). It is retried: deleting that Secret, or
// renaming writeOutputsToSecret.name, lets the object go on.
func (r *TerraformReconciler) checkOutputsSecret(ctx context.Context, obj *infrav1.Terraform) error {
	s := obj.Spec.WriteOutputsToSecret
	if s == nil {
		return nil
	}
	err := outputs.Check(ctx, r.APIReader, obj, s.Name)
	switch {
	case errors.Is(err, outputs.ErrNotOwned):
		conditions.MarkFalse(obj, infrav1.OutputsWrittenCondition, infrav1.OutputSecretConflictReason, "%v", err)
		r.report.Event(obj, obj.Status.LastAttemptedRevision, corev1.EventTypeWarning, infrav1.OutputSecretConflictReason, "nothing planned: %v", err)
		return outcome.Retry(infrav1.OutputSecretConflictReason, "nothing planned or applied: %v", err)
	case err != nil:
		return outcome.Retry(infrav1.OutputsFailedReason, "%v", err)
	}
	return nil
}

// refreshOutputs writes the outputs of the current state. With the default
// backend they are read straight from the state Secret: no runner, no
// engine, no lock. A custom backend needs a runner for it.
func (r *TerraformReconciler) refreshOutputs(ctx context.Context, obj *infrav1.Terraform, ws *workspace) error {
	if customBackend(obj) == "" {
		outs, found, err := stateOutputs(ctx, r.APIReader, obj.Namespace, names.StateSecret(obj))
		if errors.Is(err, tfstate.ErrNotPlain) {
			return r.refreshOutputsWithRunner(ctx, obj, ws)
		}
		if err != nil {
			conditions.MarkFalse(obj, infrav1.OutputsWrittenCondition, infrav1.OutputsFailedReason, "%v", err)
			return outcome.Retry(infrav1.OutputsFailedReason, "%v", err)
		}
		if found {
			return r.tellOutputs(ctx, obj, outs)
		}
	}
	return r.refreshOutputsWithRunner(ctx, obj, ws)
}

// stateOutputs reads the outputs of the state in Secret namespace/name.
// found is false when the Secret does not exist.
func stateOutputs(ctx context.Context, c client.Reader, namespace, name string) (outs []*runnerpb.Output, found bool, err error) {
	var secret corev1.Secret
	err = c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &secret)
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading state Secret %s/%s: %w", namespace, name, err)
	}
	outs, err = tfstate.DecodeOutputs(secret.Data[tfstate.DataKey])
	if err != nil {
		return nil, true, fmt.Errorf("state Secret %s/%s: %w", namespace, name, err)
	}
	return outs, true, nil
}

// refreshOutputsWithRunner reads the outputs through a short-lived runner,
// bounded by the runner start deadline plus a minute.
func (r *TerraformReconciler) refreshOutputsWithRunner(ctx context.Context, obj *infrav1.Terraform, ws *workspace) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req := runs.Request{Object: obj, Run: infrav1.RunStatus{ID: runner.NewRunID()}, Workspace: ws.forRunner(), Redactor: ws.redactor}
	rn, err := r.Runs.Place(ctx, req)
	if err != nil {
		return r.runFailure(obj, ws.redactor, ws.artifact.Revision, err, infrav1.OutputsFailedReason)
	}
	defer func() {
		if err := rn.Stop(); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "stopping a runner")
		}
	}()
	outs, err := rn.Client.Outputs(ctx)
	metrics.CountRun("outputs", err)
	if err != nil {
		ferr := runnerError(obj, ws.redactor, ws.artifact.Revision, err, infrav1.OutputsFailedReason)
		conditions.MarkFalse(obj, infrav1.OutputsWrittenCondition, outcome.ReasonOf(ferr, infrav1.OutputsFailedReason), "%s", ferr.Error())
		return ferr
	}
	return r.tellOutputs(ctx, obj, outs)
}
