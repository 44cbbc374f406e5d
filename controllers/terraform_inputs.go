package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// RBAC for inputs read from object fields: Services and Ingresses by
// default (a load balancer's address); the chart's inputKinds value grants
// more kinds.
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch

// inputRef names an object whose fields are inputs: a varsFrom entry with
// fields, or an import's idFrom of a kind other than Secret and ConfigMap.
type inputRef struct {
	apiVersion, kind, namespace, name string
	optional                          bool
}

func (in inputRef) gvk() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(in.apiVersion, in.kind)
}

// String names the object as a user would look for it.
func (in inputRef) String() string {
	return fmt.Sprintf("%s %s/%s", in.kind, in.namespace, in.name)
}

// inputObjectRef is ref's object, namespaced by default to obj's.
func inputObjectRef(obj *infrav1.Terraform, apiVersion, kind, namespace, name string, optional bool) inputRef {
	if namespace == "" {
		namespace = obj.Namespace
	}
	return inputRef{apiVersion: apiVersion, kind: kind, namespace: namespace, name: name, optional: optional}
}

// isDataKind reports whether kind is read by keys (Secret, ConfigMap)
// rather than by field paths.
func isDataKind(kind string) bool { return kind == "Secret" || kind == "ConfigMap" }

// errFieldNotSet is a field that is absent, null or empty.
var errFieldNotSet = errors.New("not set")

// errSecretInput is the refusal of a Secret's fields (refuseSecretInput).
var errSecretInput = errors.New("a Secret's fields are never read (status.inputs would keep them in plain text)")

// secretsResource is what the API server serves Secrets as.
var secretsResource = schema.GroupResource{Resource: "secrets"}

// refuseSecretInput stalls an input that is a Secret, however its kind is
// spelled: values read from fields are kept in status.inputs, which anyone
// who may read Terraform objects reads, and are not redacted from the
// runner's log. The CRD refuses kind: Secret with fields, but not secret,
// Secrets or apiVersion /v1, which the API server's REST mapper resolves
// to Secrets all the same (a kind by its resource names, case aside), so
// the mapper decides, before anything is read or watched.
func (r *TerraformReconciler) refuseSecretInput(obj *infrav1.Terraform, in inputRef) error {
	resource, err := r.inputResource(in)
	if err != nil {
		return r.inputAccessError(obj, in, err)
	}
	if resource == secretsResource {
		return stalling(infrav1.InvalidInputPathReason,
			"input %s: %w; use kind: Secret with varsKeys instead (an import's idFrom: kind: Secret with key)", in, errSecretInput)
	}
	return nil
}

// inputResource is the resource the API server serves in's kind as:
// the kind as spelled, or else the kind taken for a resource name
// (secret, Secrets). Empty when it serves neither: reading the object
// says so.
func (r *TerraformReconciler) inputResource(in inputRef) (schema.GroupResource, error) {
	mapper := r.RESTMapper()
	gvk := in.gvk()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err == nil {
		return m.Resource.GroupResource(), nil
	}
	if !apimeta.IsNoMatchError(err) {
		return schema.GroupResource{}, err
	}
	gvr, err := mapper.ResourceFor(gvk.GroupVersion().WithResource(gvk.Kind))
	if apimeta.IsNoMatchError(err) {
		return schema.GroupResource{}, nil
	}
	return gvr.GroupResource(), err
}

// readInputObject reads in's object straight from the API server (the
// cache holds only its metadata), after making sure a watch on its kind
// wakes the objects that read it. nil for a missing optional object.
func (r *TerraformReconciler) readInputObject(ctx context.Context, obj *infrav1.Terraform, in inputRef) (*unstructured.Unstructured, error) {
	gvk := in.gvk()
	if err := r.inputWatches.ensure(ctx, gvk); err != nil {
		return nil, r.inputAccessError(obj, in, err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: in.namespace, Name: in.name}, u)
	switch {
	case apierrors.IsNotFound(err) && in.optional:
		return nil, nil
	case apierrors.IsNotFound(err):
		// The watch on its kind wakes obj when it is created.
		return nil, waiting(infrav1.InputNotFoundReason, obj.GetInterval(),
			"input %s not found: create it, fix the reference, or mark it optional", in)
	case err != nil:
		return nil, r.inputAccessError(obj, in, err)
	}
	return u, nil
}

// inputAccessError says why in's object could not be read and what to do.
func (r *TerraformReconciler) inputAccessError(obj *infrav1.Terraform, in inputRef, err error) error {
	gvk := in.gvk()
	switch {
	case apimeta.IsNoMatchError(err):
		return waiting(infrav1.InputNotFoundReason, obj.GetRetryInterval(),
			"input %s: the API server serves no kind %s in %s: fix apiVersion and kind, or install its CRD", in, gvk.Kind, gvk.GroupVersion())
	case apierrors.IsForbidden(err):
		return waiting(infrav1.InputForbiddenReason, obj.GetRetryInterval(),
			"input %s: the controller may not get, list and watch %s in %s: grant it (the chart's inputKinds value)", in, gvk.Kind, gvk.GroupVersion())
	}
	return retry(infrav1.InputNotFoundReason, "reading input %s: %v", in, err)
}

// fieldValue evaluates a kubectl-style JSONPath (braces optional) on u:
// one value as it is, several as a list. errFieldNotSet when it selects
// nothing, or only null and empty values; any other error is a path that
// does not parse or does not fit the object.
func fieldValue(u *unstructured.Unstructured, path string) (json.RawMessage, error) {
	jp, err := parseFieldPath(path)
	if err != nil {
		return nil, err
	}
	results, err := jp.FindResults(u.Object)
	if err != nil {
		if strings.Contains(err.Error(), "array index out of bounds") {
			// An index into a list that is still empty.
			return nil, errFieldNotSet
		}
		return nil, err
	}
	var values []any
	for _, rs := range results {
		for _, v := range rs {
			if x := v.Interface(); !isEmptyValue(x) {
				values = append(values, x)
			}
		}
	}
	if len(values) == 0 {
		return nil, errFieldNotSet
	}
	var value any = values
	if len(values) == 1 {
		value = values[0]
	}
	return json.Marshal(value)
}

// parseFieldPath parses path, adding kubectl's braces when it has none.
func parseFieldPath(path string) (*jsonpath.JSONPath, error) {
	if !strings.HasPrefix(strings.TrimSpace(path), "{") {
		path = "{" + path + "}"
	}
	jp := jsonpath.New("input").AllowMissingKeys(true)
	if err := jp.Parse(path); err != nil {
		return nil, err
	}
	return jp, nil
}

func isEmptyValue(x any) bool {
	if x == nil {
		return true
	}
	v := reflect.ValueOf(x)
	switch v.Kind() {
	case reflect.String, reflect.Map, reflect.Slice:
		return v.Len() == 0
	}
	return false
}

// objectFieldValues reads in's fields into variables (name to path). A
// field not set is reported in notSet ("<path> (<name>)") unless in is
// optional; a path that does not parse, or an object that is a Secret,
// stalls until the spec changes.
func (r *TerraformReconciler) objectFieldValues(ctx context.Context, obj *infrav1.Terraform, in inputRef, fields []infrav1.FieldVariable) (values map[string]json.RawMessage, notSet []string, err error) {
	if err := r.refuseSecretInput(obj, in); err != nil {
		return nil, nil, err
	}
	u, err := r.readInputObject(ctx, obj, in)
	if err != nil || u == nil {
		return nil, nil, err
	}
	values = map[string]json.RawMessage{}
	for _, f := range fields {
		v, err := fieldValue(u, f.Path)
		switch {
		case errors.Is(err, errFieldNotSet) && in.optional:
			continue
		case errors.Is(err, errFieldNotSet):
			notSet = append(notSet, fmt.Sprintf("%s (%s)", f.Path, f.Name))
			continue
		case err != nil:
			return nil, nil, stalling(infrav1.InvalidInputPathReason,
				"input %s: path %q of %s: %v; fix the path (kubectl's JSONPath, e.g. .status.loadBalancer.ingress[0].hostname)", in, f.Path, f.Name, err)
		}
		values[f.Name] = v
	}
	return values, notSet, nil
}

// inputsNotReady is the waiting outcome for fields not set yet: the watch
// on their objects' kinds wakes obj when they change, so the interval is
// only a fallback.
func inputsNotReady(obj *infrav1.Terraform, waitingFor []string) error {
	return waiting(infrav1.InputNotReadyReason, obj.GetInterval(), "waiting for %s", strings.Join(waitingFor, "; "))
}
