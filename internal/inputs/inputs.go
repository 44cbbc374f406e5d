// Package inputs resolves everything a Terraform object's run is made of
// besides its module: the variables (spec.vars, and varsFrom's Secrets,
// ConfigMaps and other objects' fields), the ids of spec.imports, the
// engine version spec.engine names, and what the object waits for first
// (its dependencies, references to other namespaces). What cannot be
// resolved yet comes back as an internal/outcome error that says what to
// fix (a stall) or what is awaited (a wait), so the reconciler passes it
// on unchanged. Everything is read straight from the API server (a
// Secret's data, or a field, from a stale cache would plan with old
// values); a kind whose fields are read is watched from the first time an
// object names it (Watches), so a change of that object wakes its
// readers.
package inputs

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/outcome"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// Resolver reads a Terraform object's inputs.
type Resolver struct {
	// Reader reads Secrets, ConfigMaps, input objects and dependencies
	// from the API server, uncached.
	Reader client.Reader
	// Mapper resolves an input's kind to the resource the API server
	// serves it as.
	Mapper apimeta.RESTMapper
	// Watches watch the kinds whose fields are read; nil: none (the
	// object finds a change at its next interval).
	Watches *Watches
	// AllowCrossNamespaceRefs lets sourceRef, varsFrom, imports and
	// dependsOn name objects of other namespaces (CheckNamespaces).
	AllowCrossNamespaceRefs bool
	// Engines are where spec.engine's versions come from.
	Engines EngineSources
}

// Mode says how strictly inputs are read.
type Mode int

const (
	// Plan reads every input and waits for fields not set yet.
	Plan Mode = iota
	// Destroy reads inputs for deleting the object: an object or a field
	// that is gone leaves its variables to the values status.inputs
	// recorded, or the module's defaults (uninstalling an app often
	// deletes a Service before the Terraform object, and waiting for it
	// would keep the finalizer forever), and imports are not read.
	Destroy
	// Redaction reads only what comes from Secrets: the values a run's
	// log is redacted of when a restarted controller attaches to it.
	Redaction
)

// Vars are the inputs handed to the engine.
type Vars struct {
	// JSON is one JSON object of all values, sorted by name.
	JSON []byte
	// Secrets are the values read from Secrets, to redact from any text.
	Secrets []string
	// Imports are spec.imports with their ids read.
	Imports []*runnerpb.Import
	// Fields are the values read from other objects' fields, by variable
	// name: what status.inputs records (Record).
	Fields map[string]json.RawMessage
}

// Vars merges varsFrom (in order) and then vars into one JSON object, and
// reads the imports' ids. Values from Secrets are collected so they can
// be redacted everywhere. Fields of other objects that are not set yet
// are waited for together, in one InputNotReady message.
func (r *Resolver) Vars(ctx context.Context, obj *infrav1.Terraform, mode Mode) (*Vars, error) {
	values, fieldValues := map[string]json.RawMessage{}, map[string]json.RawMessage{}
	var secrets, notSet []string
	for _, ref := range obj.Spec.VarsFrom {
		if !IsDataKind(ref.Kind) {
			if mode == Redaction {
				continue
			}
			in := RefOf(obj, ref.APIVersion, ref.Kind, ref.Namespace, ref.Name, ref.Optional || mode == Destroy)
			fields, waitingFor, err := r.fieldValues(ctx, obj, in, ref.Fields)
			if errors.Is(err, ErrSecretInput) {
				// A controller without this refusal may have recorded
				// the Secret's values: they leave status with the
				// refusal, not with the next successful plan.
				forget(obj, ref.Fields)
			}
			if err != nil {
				return nil, err
			}
			for _, w := range waitingFor {
				notSet = append(notSet, in.String()+" to set "+w)
			}
			if mode == Destroy {
				fields = withRecorded(obj, ref.Fields, fields)
			}
			maps.Copy(values, fields)
			maps.Copy(fieldValues, fields)
			continue
		}
		if mode == Redaction && ref.Kind != "Secret" {
			continue
		}
		data, err := r.readData(ctx, obj.Namespace, ref)
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
	imports, importSecrets, importsNotSet, err := r.imports(ctx, obj, mode)
	if err != nil {
		return nil, err
	}
	secrets = append(secrets, importSecrets...)
	if notSet = append(notSet, importsNotSet...); len(notSet) > 0 {
		return nil, notReady(obj, notSet)
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
		return nil, outcome.Stalling(infrav1.VarsNotFoundReason, "spec.vars holds a value that is not valid JSON: %v", err)
	}
	sort.Strings(secrets)
	return &Vars{JSON: out, Secrets: secrets, Imports: imports, Fields: fieldValues}, nil
}

// withRecorded fills in, for a destroy, the fields that are gone with the
// values status.inputs recorded when they were last read.
func withRecorded(obj *infrav1.Terraform, fields []infrav1.FieldVariable, values map[string]json.RawMessage) map[string]json.RawMessage {
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

// Record keeps the values read from objects' fields in status.inputs,
// sorted by name, for a destroy after those objects are gone.
func Record(obj *infrav1.Terraform, fields map[string]json.RawMessage) {
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

// forget drops what status.inputs recorded for fields.
func forget(obj *infrav1.Terraform, fields []infrav1.FieldVariable) {
	obj.Status.Inputs = slices.DeleteFunc(obj.Status.Inputs, func(rec infrav1.Variable) bool {
		return slices.ContainsFunc(fields, func(f infrav1.FieldVariable) bool { return f.Name == rec.Name })
	})
	if len(obj.Status.Inputs) == 0 {
		obj.Status.Inputs = nil
	}
}
