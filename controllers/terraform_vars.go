package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// renderedVars are the inputs handed to terraform: variable values and
// the resources to import.
type renderedVars struct {
	// json is one JSON object of all values, sorted by name.
	json []byte
	// secrets are the values read from Secrets, to redact from any text.
	secrets []string
	// imports are spec.imports with their ids read (terraform_imports.go).
	imports []*runnerpb.Import
	// fields are the values read from other objects' fields, by variable
	// name: what status.inputs records.
	fields map[string]json.RawMessage
}

// inputsMode says how strictly inputs are read.
type inputsMode int

const (
	// planInputs reads every input and waits for fields not set yet.
	planInputs inputsMode = iota
	// destroyInputs reads inputs for deleting the object: an object or a
	// field that is gone leaves its variables to the module's defaults
	// (uninstalling an app often deletes a Service before the Terraform
	// object, and waiting for it would keep the finalizer forever), and
	// imports are not read.
	destroyInputs
	// redactionInputs reads only what comes from Secrets: the values a
	// run's log is redacted of when a restarted controller attaches to it.
	redactionInputs
)

// renderVars merges varsFrom (in order) and then vars into one JSON object,
// and reads the imports' ids. Values from Secrets are remembered so they
// can be redacted everywhere. Fields of other objects that are not set yet
// are waited for together, in one InputNotReady message.
func (r *TerraformReconciler) renderVars(ctx context.Context, obj *infrav1.Terraform, mode inputsMode) (*renderedVars, error) {
	values, fieldValues := map[string]json.RawMessage{}, map[string]json.RawMessage{}
	var secrets, notSet []string
	for _, ref := range obj.Spec.VarsFrom {
		if !isDataKind(ref.Kind) {
			if mode == redactionInputs {
				continue
			}
			in := inputObjectRef(obj, ref.APIVersion, ref.Kind, ref.Namespace, ref.Name, ref.Optional || mode == destroyInputs)
			fields, waitingFor, err := r.objectFieldValues(ctx, obj, in, ref.Fields)
			if errors.Is(err, errSecretInput) {
				// A controller without this refusal may have recorded
				// the Secret's values: they leave status with the
				// refusal, not with the next successful plan.
				forgetInputs(obj, ref.Fields)
			}
			if err != nil {
				return nil, err
			}
			for _, w := range waitingFor {
				notSet = append(notSet, in.String()+" to set "+w)
			}
			if mode == destroyInputs {
				fields = withRecordedInputs(obj, ref.Fields, fields)
			}
			maps.Copy(values, fields)
			maps.Copy(fieldValues, fields)
			continue
		}
		if mode == redactionInputs && ref.Kind != "Secret" {
			continue
		}
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
	imports, importSecrets, importsNotSet, err := r.resolveImports(ctx, obj, mode)
	if err != nil {
		return nil, err
	}
	secrets = append(secrets, importSecrets...)
	if notSet = append(notSet, importsNotSet...); len(notSet) > 0 {
		return nil, inputsNotReady(obj, notSet)
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
	return &renderedVars{json: out, secrets: secrets, imports: imports, fields: fieldValues}, nil
}

// withRecordedInputs fills in, for a destroy, the fields that are gone
// with the values status.inputs recorded when they were last read.
func withRecordedInputs(obj *infrav1.Terraform, fields []infrav1.FieldVariable, values map[string]json.RawMessage) map[string]json.RawMessage {
	out := maps.Clone(values)
	if out == nil {
		out = map[string]json.RawMessage{}
	}
	for _, f := range fields {
		if _, ok := out[f.Name]; ok {
			continue
		}
		for _, rec := range obj.Status.Inputs {
			if rec.Name == f.Name && rec.Value != nil {
				out[f.Name] = json.RawMessage(rec.Value.Raw)
			}
		}
	}
	return out
}

// recordInputs keeps the values read from objects' fields in
// status.inputs, sorted by name, for a destroy after those objects are
// gone.
func recordInputs(obj *infrav1.Terraform, fields map[string]json.RawMessage) {
	if len(fields) == 0 {
		obj.Status.Inputs = nil
		return
	}
	recorded := make([]infrav1.Variable, 0, len(fields))
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		recorded = append(recorded, infrav1.Variable{Name: name, Value: &apiextensionsv1.JSON{Raw: fields[name]}})
	}
	obj.Status.Inputs = recorded
}

// forgetInputs drops what status.inputs recorded for fields.
func forgetInputs(obj *infrav1.Terraform, fields []infrav1.FieldVariable) {
	obj.Status.Inputs = slices.DeleteFunc(obj.Status.Inputs, func(rec infrav1.Variable) bool {
		return slices.ContainsFunc(fields, func(f infrav1.FieldVariable) bool { return f.Name == rec.Name })
	})
	if len(obj.Status.Inputs) == 0 {
		obj.Status.Inputs = nil
	}
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
