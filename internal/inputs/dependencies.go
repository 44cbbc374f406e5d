package inputs

import (
	"context"
	"fmt"
	"strings"

	"github.com/fluxcd/pkg/apis/meta"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/outcome"
)

// Dependencies waits until every dependsOn object is Ready at its current
// generation, naming what is awaited.
func (r *Resolver) Dependencies(ctx context.Context, obj *infrav1.Terraform) error {
	var waitingFor []string
	for _, dep := range obj.Spec.DependsOn {
		gvk, key := DependencyKey(obj, dep)
		ready, why, err := r.isReady(ctx, gvk, key)
		if err != nil {
			return outcome.Retry(infrav1.DependencyNotReadyReason, "checking dependency %s %s: %v", gvk.Kind, key, err)
		}
		if !ready {
			waitingFor = append(waitingFor, fmt.Sprintf("%s %s (%s)", gvk.Kind, key, why))
		}
	}
	if len(waitingFor) > 0 {
		return outcome.WaitingFor(infrav1.DependencyNotReadyReason, obj.GetRetryInterval(), "waiting for %s", strings.Join(waitingFor, ", "))
	}
	return nil
}

// dependencyAPIVersions are the API versions of the kinds dependsOn may
// name without one: those the controller's ClusterRole may read.
var dependencyAPIVersions = map[string]string{
	infrav1.TerraformKind: infrav1.GroupVersion.String(),
	"Kustomization":       "kustomize.toolkit.fluxcd.io/v1",
	"HelmRelease":         "helm.toolkit.fluxcd.io/v2",
}

// DependencyKey defaults a reference to a Terraform object in obj's
// namespace, and the API version of the kinds the controller can read.
func DependencyKey(obj *infrav1.Terraform, dep infrav1.DependencyReference) (schema.GroupVersionKind, client.ObjectKey) {
	apiVersion, kind := dep.APIVersion, dep.Kind
	if kind == "" {
		kind = infrav1.TerraformKind
	}
	if apiVersion == "" {
		apiVersion = dependencyAPIVersions[kind]
	}
	ns := dep.Namespace
	if ns == "" {
		ns = obj.Namespace
	}
	return schema.FromAPIVersionAndKind(apiVersion, kind), client.ObjectKey{Namespace: ns, Name: dep.Name}
}

// isReady reads any object with a Ready condition straight from the API
// server: the cache holds no other kind, and with --watch-label-selector
// only this shard's Terraform objects, while a dependency may be in
// another shard.
func (r *Resolver) isReady(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey) (bool, string, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := r.Reader.Get(ctx, key, u); err != nil {
		if apierrors.IsNotFound(err) {
			return false, "not found", nil
		}
		return false, "", err
	}
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if observed != u.GetGeneration() {
		return false, "not reconciled at its current generation yet", nil
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != meta.ReadyCondition {
			continue
		}
		if m["status"] == "True" {
			return true, "", nil
		}
		return false, fmt.Sprintf("not Ready: %v", m["message"]), nil
	}
	return false, "no Ready condition yet", nil
}
