package controllers

import (
	"context"
	"encoding/json"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// renderedVars are the variable values handed to terraform.
type renderedVars struct {
	// json is one JSON object of all values, sorted by name.
	json []byte
	// secrets are the values read from Secrets, to redact from any text.
	secrets []string
}

// renderVars merges varsFrom (in order) and then vars into one JSON object.
// Values from Secrets are remembered so they can be redacted everywhere.
func (r *TerraformReconciler) renderVars(ctx context.Context, obj *infrav1.Terraform) (*renderedVars, error) {
	values := map[string]json.RawMessage{}
	var secrets []string
	for _, ref := range obj.Spec.VarsFrom {
		data, err := r.readVarsSource(ctx, obj.Namespace, ref)
		if err != nil {
			return nil, err
		}
		selected, err := selectKeys(ref, data)
		if err != nil {
			return nil, err
		}
		for name, raw := range selected {
			values[name] = varValue(raw)
			if ref.Kind == "Secret" {
				secrets = append(secrets, raw)
			}
		}
	}
	for _, v := range obj.Spec.Vars {
		if v.Value == nil || len(v.Value.Raw) == 0 {
			values[v.Name] = json.RawMessage("null")
			continue
		}
		values[v.Name] = json.RawMessage(v.Value.Raw)
	}
	out, err := json.Marshal(values) // map keys are sorted: stable digest
	if err != nil {
		return nil, stalling(infrav1.VarsNotFoundReason, "spec.vars holds a value that is not valid JSON: %v", err)
	}
	sort.Strings(secrets)
	return &renderedVars{json: out, secrets: secrets}, nil
}

// readVarsSource reads a Secret's or ConfigMap's data; nil for a missing
// optional one.
func (r *TerraformReconciler) readVarsSource(ctx context.Context, namespace string, ref infrav1.VarsReference) (map[string]string, error) {
	key := client.ObjectKey{Namespace: namespace, Name: ref.Name}
	data := map[string]string{}
	var err error
	switch ref.Kind {
	case "Secret":
		s := &corev1.Secret{}
		if err = r.APIReader.Get(ctx, key, s); err == nil {
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
	case "ConfigMap":
		cm := &corev1.ConfigMap{}
		if err = r.APIReader.Get(ctx, key, cm); err == nil {
			for k, v := range cm.Data {
				data[k] = v
			}
		}
	default:
		return nil, stalling(infrav1.VarsNotFoundReason, "varsFrom kind %q is not supported: use Secret or ConfigMap", ref.Kind)
	}
	switch {
	case apierrors.IsNotFound(err) && ref.Optional:
		return nil, nil
	case apierrors.IsNotFound(err):
		return nil, retry(infrav1.VarsNotFoundReason, "varsFrom %s %s/%s not found: create it, or mark the reference optional", ref.Kind, namespace, ref.Name)
	case err != nil:
		return nil, retry(infrav1.VarsNotFoundReason, "reading varsFrom %s %s/%s: %v", ref.Kind, namespace, ref.Name, err)
	}
	return data, nil
}

// selectKeys applies varsKeys ("key" or "key:name") to data.
func selectKeys(ref infrav1.VarsReference, data map[string]string) (map[string]string, error) {
	if data == nil {
		return nil, nil
	}
	if len(ref.VarsKeys) == 0 {
		return data, nil
	}
	out := map[string]string{}
	for _, sel := range ref.VarsKeys {
		key, name, found := strings.Cut(sel, ":")
		if !found {
			name = key
		}
		v, ok := data[key]
		if !ok {
			if ref.Optional {
				continue
			}
			return nil, retry(infrav1.VarsNotFoundReason, "varsFrom %s %s has no key %q: add it, fix varsKeys, or mark the reference optional", ref.Kind, ref.Name, key)
		}
		out[name] = v
	}
	return out, nil
}

// varValue passes JSON objects and lists as structured values and anything
// else as a string; terraform converts strings to numbers and bools where the
// variable's type asks for them.
func varValue(s string) json.RawMessage {
	t := strings.TrimSpace(s)
	if (strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[")) && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(s)
	return b
}
