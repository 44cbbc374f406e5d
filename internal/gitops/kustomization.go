package gitops

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KustomizationGVK is Flux's Kustomization.
var KustomizationGVK = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}

// Kustomization is an unstructured Kustomization with only its name set:
// for Get, Delete and Patch.
func Kustomization(namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(KustomizationGVK)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// NewKustomization is a Kustomization with spec, ready to Create.
func NewKustomization(namespace, name string, spec map[string]any) *unstructured.Unstructured {
	u := Kustomization(namespace, name)
	u.Object["spec"] = spec
	return u
}

// KustomizationList is an empty unstructured list of Kustomizations.
func KustomizationList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(KustomizationGVK.GroupVersion().WithKind(KustomizationGVK.Kind + "List"))
	return l
}

// RequestReconcile sets reconcile.fluxcd.io/requestedAt on obj, as
// `flux reconcile` does, so that its Flux controller reconciles it now
// instead of at its interval. A missing object is not an error.
func RequestReconcile(ctx context.Context, c client.Client, obj client.Object) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, time.Now().Format(time.RFC3339Nano))
	return client.IgnoreNotFound(c.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", []byte(patch))))
}

// Condition returns the condition of type t of an unstructured object with
// standard status.conditions, or nil.
func Condition(u *unstructured.Unstructured, t string) *metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	conds := make([]metav1.Condition, 0, len(raw))
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		var c metav1.Condition
		if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c) == nil {
			conds = append(conds, c)
		}
	}
	return apimeta.FindStatusCondition(conds, t)
}

// ReadyMessage is the message of the Ready condition, or "not reconciled
// yet".
func ReadyMessage(u *unstructured.Unstructured) string {
	if c := Condition(u, meta.ReadyCondition); c != nil {
		return c.Message
	}
	return "not reconciled yet"
}
