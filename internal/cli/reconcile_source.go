package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/source"
)

// sourceResult is the source `reconcile --with-source` reconciled first.
type sourceResult struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Revision is the artifact's revision once reconciled.
	Revision string `json:"revision,omitempty"`
}

// sourceResources are the source kinds as `kubectl auth can-i` names them.
var sourceResources = map[string]string{
	sourcev1.GitRepositoryKind: "gitrepositories.source.toolkit.fluxcd.io",
	sourcev1.OCIRepositoryKind: "ocirepositories.source.toolkit.fluxcd.io",
	sourcev1.BucketKind:        "buckets.source.toolkit.fluxcd.io",
}

// fluxSourceCommand is the `flux resume source` subcommand of a kind.
var fluxSourceCommand = map[string]string{
	sourcev1.GitRepositoryKind: "git",
	sourcev1.OCIRepositoryKind: "oci",
	sourcev1.BucketKind:        "bucket",
}

// sourceStatus is what the CLI reads of a source's status, the same at
// v1 and v1beta2.
type sourceStatus struct {
	Conditions             []metav1.Condition `json:"conditions,omitempty"`
	LastHandledReconcileAt string             `json:"lastHandledReconcileAt,omitempty"`
	Artifact               *struct {
		Revision string `json:"revision"`
	} `json:"artifact,omitempty"`
}

// reconcileSource does for obj's Flux source what `flux reconcile source`
// does: it requests a reconcile and waits until source-controller has
// handled it with a new artifact, or failed.
func (a *app) reconcileSource(ctx context.Context, s *session, obj *v1alpha1.Terraform, w io.Writer, deadline time.Time, timeout time.Duration) (*sourceResult, error) {
	ref := obj.Spec.SourceRef
	res := &sourceResult{Kind: ref.Kind, Namespace: cmp.Or(ref.Namespace, obj.Namespace), Name: ref.Name}
	what := fmt.Sprintf("%s %s/%s", res.Kind, res.Namespace, res.Name)
	if res.Kind == sourcev1.ExternalArtifactKind {
		// source-controller does not reconcile an ExternalArtifact: the
		// ArtifactGenerator its spec.sourceRef names writes it, so a
		// requested reconcile would only wait out the timeout.
		return nil, fmt.Errorf("%s is written by the ArtifactGenerator its spec.sourceRef names: reconcile that generator's source instead, then run without --with-source", what)
	}
	src, err := s.source(ctx, res)
	if err != nil {
		return nil, err
	}
	if suspended, _, _ := unstructured.NestedBool(src.Object, "spec", "suspend"); suspended {
		return nil, fmt.Errorf("%s is suspended: resume it first with flux resume source %s %s -n %s", what, fluxSourceCommand[res.Kind], res.Name, res.Namespace)
	}
	requested := newRequest()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{meta.ReconcileRequestAnnotation: requested}}})
	if err := s.c.Patch(ctx, src, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("landform-cli")); err != nil {
		return nil, s.explain(err, "patch", sourceResources[res.Kind], res.Kind, res.Namespace, res.Name)
	}
	fmt.Fprintf(w, "► requested reconciliation of %s\n", what)

	last := ""
	var failure error
	var reason string
	polling, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	err = wait.PollUntilContextCancel(polling, a.PollInterval, true, func(context.Context) (bool, error) {
		err := s.c.Get(ctx, client.ObjectKeyFromObject(src), src)
		if ctx.Err() != nil {
			return false, nil
		}
		if err != nil {
			return false, s.explain(err, "get", sourceResources[res.Kind], res.Kind, res.Namespace, res.Name)
		}
		var step string
		var done bool
		step, done, reason, err = judgeSource(src, requested)
		if err != nil {
			failure = fmt.Errorf("%s is not ready (%s): %w", what, reason, err)
			return true, nil
		}
		if done {
			return true, nil
		}
		if step != last {
			fmt.Fprintf(w, "◎ %s\n", step)
			last = step
		}
		return false, nil
	})
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return nil, timedOut(fmt.Errorf("timed out after %s waiting for %s (last: %s); check that source-controller runs", timeout, what, orDash(last)))
	case err != nil:
		return nil, err
	case failure != nil:
		fmt.Fprintf(w, "✗ %s\n", reason)
		return nil, failure
	}
	st, _ := statusOfSource(src)
	if st.Artifact != nil {
		res.Revision = st.Artifact.Revision
	}
	fmt.Fprintf(w, "✔ fetched revision %s\n", orDash(res.Revision))
	return res, nil
}

// source reads the source res names, at v1 or, where the cluster serves
// the kind only there, v1beta2.
func (s *session) source(ctx context.Context, res *sourceResult) (*unstructured.Unstructured, error) {
	var err error
	for _, version := range source.Versions {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(sourcev1.GroupVersion.WithKind(res.Kind))
		u.SetAPIVersion(sourcev1.GroupVersion.Group + "/" + version)
		if err = s.c.Get(ctx, client.ObjectKey{Namespace: res.Namespace, Name: res.Name}, u); err == nil {
			return u, nil
		}
		if !apimeta.IsNoMatchError(err) {
			break
		}
	}
	if apimeta.IsNoMatchError(err) {
		return nil, fmt.Errorf("Flux's %s is not served by this cluster: install Flux's source-controller, or check --context", res.Kind)
	}
	return nil, s.explain(err, "get", sourceResources[res.Kind], res.Kind, res.Namespace, res.Name)
}

func statusOfSource(u *unstructured.Unstructured) (sourceStatus, error) {
	var st sourceStatus
	m, _, _ := unstructured.NestedMap(u.Object, "status")
	err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(m, &st)
	return st, err
}

// judgeSource decides whether source-controller is done with the request:
// done when the source is Ready with an artifact (kstatus Current), an
// error (and its reason) when it is not Ready and not retrying; else the
// step it is at.
func judgeSource(u *unstructured.Unstructured, requested string) (step string, done bool, reason string, err error) {
	st, err := statusOfSource(u)
	if err != nil {
		return "", false, "Unreadable", err
	}
	ready := apimeta.FindStatusCondition(st.Conditions, meta.ReadyCondition)
	if st.LastHandledReconcileAt != requested || ready == nil || ready.ObservedGeneration != 0 && ready.ObservedGeneration != u.GetGeneration() {
		return "waiting for source-controller", false, "", nil
	}
	res, err := kstatus.Compute(u)
	if err != nil {
		return "", false, "Unreadable", err
	}
	reconciling := apimeta.FindStatusCondition(st.Conditions, meta.ReconcilingCondition)
	switch {
	case res.Status == kstatus.CurrentStatus && st.Artifact != nil:
		return "", true, "", nil
	case res.Status == kstatus.FailedStatus:
		return "", false, meta.StalledCondition, errors.New(oneLine(res.Message))
	case res.Status == kstatus.TerminatingStatus:
		return "", false, "Deleting", errors.New(oneLine(res.Message))
	case ready.Status == metav1.ConditionFalse && (reconciling == nil || reconciling.Status != metav1.ConditionTrue):
		return "", false, ready.Reason, errors.New(oneLine(ready.Message))
	case reconciling != nil && reconciling.Status == metav1.ConditionTrue && reconciling.Message != "":
		return oneLine(reconciling.Message), false, "", nil
	}
	return cmp.Or(oneLine(ready.Message), "waiting for source-controller"), false, "", nil
}
