package inputs

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
	"github.com/landform-dev/landform/internal/outcome"
)

// Ref names an object whose fields are inputs: a varsFrom entry with
// fields, or an import's idFrom of a kind other than Secret and
// ConfigMap.
type Ref struct {
	APIVersion, Kind, Namespace, Name string
	Optional                          bool
}

// GVK is the object's group, version and kind.
func (in Ref) GVK() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(in.APIVersion, in.Kind)
}

// String names the object as a user would look for it.
func (in Ref) String() string {
	return fmt.Sprintf("%s %s/%s", in.Kind, in.Namespace, in.Name)
}

// RefOf is a reference's object, namespaced by default to obj's.
func RefOf(obj *infrav1.Terraform, apiVersion, kind, namespace, name string, optional bool) Ref {
	if namespace == "" {
		namespace = obj.Namespace
	}
	return Ref{APIVersion: apiVersion, Kind: kind, Namespace: namespace, Name: name, Optional: optional}
}

// errFieldNotSet is a field that is absent, null or empty.
var errFieldNotSet = errors.New("not set")

// ErrSecretInput is the refusal of a Secret's fields.
var ErrSecretInput = errors.New("a Secret's fields are never read (status.inputs would keep them in plain text)")

// secretsResource is what the API server serves Secrets as.
var secretsResource = schema.GroupResource{Resource: "secrets"}

// refuseSecret stalls an input that is a Secret, however its kind is
// spelled: values read from fields are kept in status.inputs, which
// anyone who may read Terraform objects reads, and are not redacted from
// the runner's log. The CRD refuses kind: Secret with fields, but not
// secret, Secrets or apiVersion /v1, which the API server's REST mapper
// resolves to Secrets all the same (a kind by its resource names, case
// aside), so the mapper decides, before anything is read or watched.
func (r *Resolver) refuseSecret(obj *infrav1.Terraform, in Ref) error {
	resource, err := r.resource(in)
	if err != nil {
		return accessError(obj, in, err)
	}
	if resource == secretsResource {
		return outcome.Stalling(infrav1.InvalidInputPathReason,
			"input %s: %w; use kind: Secret with varsKeys instead (an import's idFrom: kind: Secret with key)", in, ErrSecretInput)
	}
	return nil
}

// resource is the resource the API server serves in's kind as: the kind
// as spelled, or else the kind taken for a resource name (secret,
// Secrets). Empty when it serves neither: reading the object says so.
func (r *Resolver) resource(in Ref) (schema.GroupResource, error) {
	gvk := in.GVK()
	m, err := r.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err == nil {
		return m.Resource.GroupResource(), nil
	}
	if !apimeta.IsNoMatchError(err) {
		return schema.GroupResource{}, err
	}
	gvr, err := r.Mapper.ResourceFor(gvk.GroupVersion().WithResource(gvk.Kind))
	if apimeta.IsNoMatchError(err) {
		return schema.GroupResource{}, nil
	}
	return gvr.GroupResource(), err
}

// readObject reads in's object straight from the API server (the cache
// holds only its metadata), after making sure a watch on its kind wakes
// the objects that read it. nil for a missing optional object.
func (r *Resolver) readObject(ctx context.Context, obj *infrav1.Terraform, in Ref) (*unstructured.Unstructured, error) {
	gvk := in.GVK()
	if err := r.Watches.ensure(ctx, gvk); err != nil {
		return nil, accessError(obj, in, err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: in.Namespace, Name: in.Name}, u)
	switch {
	case apierrors.IsNotFound(err) && in.Optional:
		return nil, nil
	case apierrors.IsNotFound(err):
		// The watch on its kind wakes obj when it is created.
		return nil, outcome.WaitingFor(infrav1.InputNotFoundReason, obj.GetInterval(),
			"input %s not found: create it, fix the reference, or mark it optional", in)
	case err != nil:
		return nil, accessError(obj, in, err)
	}
	return u, nil
}

// accessError says why in's object could not be read and what to do.
func accessError(obj *infrav1.Terraform, in Ref, err error) error {
	gvk := in.GVK()
	switch {
	case apimeta.IsNoMatchError(err):
		return outcome.WaitingFor(infrav1.InputNotFoundReason, obj.GetRetryInterval(),
			"input %s: the API server serves no kind %s in %s: fix apiVersion and kind, or install its CRD", in, gvk.Kind, gvk.GroupVersion())
	case apierrors.IsForbidden(err):
		return outcome.WaitingFor(infrav1.InputForbiddenReason, obj.GetRetryInterval(),
			"input %s: the controller may not get, list and watch %s in %s: grant it (the chart's inputKinds value)", in, gvk.Kind, gvk.GroupVersion())
	}
	return outcome.Retry(infrav1.InputNotFoundReason, "reading input %s: %v", in, err)
}

// FieldValue evaluates a kubectl-style JSONPath (braces optional) on u:
// one value as it is, several as a list. errFieldNotSet when it selects
// nothing, or only null and empty values; any other error is a path that
// does not parse or does not fit the object.
func FieldValue(u *unstructured.Unstructured, path string) (json.RawMessage, error) {
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

// fieldValues reads in's fields into variables (name to path). A field
// not set is reported in notSet ("<path> (<name>)") unless in is
// optional; a path that does not parse, or an object that is a Secret,
// stalls until the spec changes.
func (r *Resolver) fieldValues(ctx context.Context, obj *infrav1.Terraform, in Ref, fields []infrav1.FieldVariable) (values map[string]json.RawMessage, notSet []string, err error) {
	if err := r.refuseSecret(obj, in); err != nil {
		return nil, nil, err
	}
	u, err := r.readObject(ctx, obj, in)
	if err != nil || u == nil {
		return nil, nil, err
	}
	values = map[string]json.RawMessage{}
	for _, f := range fields {
		v, err := FieldValue(u, f.Path)
		switch {
		case errors.Is(err, errFieldNotSet) && in.Optional:
			continue
		case errors.Is(err, errFieldNotSet):
			notSet = append(notSet, fmt.Sprintf("%s (%s)", f.Path, f.Name))
			continue
		case err != nil:
			return nil, nil, outcome.Stalling(infrav1.InvalidInputPathReason,
				"input %s: path %q of %s: %v; fix the path (kubectl's JSONPath, e.g. .status.loadBalancer.ingress[0].hostname)", in, f.Path, f.Name, err)
		}
		values[f.Name] = v
	}
	return values, notSet, nil
}

// notReady is the waiting outcome for fields not set yet: the watch on
// their objects' kinds wakes obj when they change, so the interval is
// only a fallback.
func notReady(obj *infrav1.Terraform, waitingFor []string) error {
	return outcome.WaitingFor(infrav1.InputNotReadyReason, obj.GetInterval(), "waiting for %s", strings.Join(waitingFor, "; "))
}
