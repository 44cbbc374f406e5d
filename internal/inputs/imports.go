package inputs

import (
	"context"
	"encoding/json"
	"regexp"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/outcome"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// importAddress is the pattern of spec.imports[].to, as the CRD checks it;
// checked again here because the runner writes it into the module as code.
var importAddress = regexp.MustCompile(`^(module\.[a-zA-Z_][a-zA-Z0-9_-]*(\[("[^"\\${}%]*"|[0-9]+)\])?\.)*[a-zA-Z_][a-zA-Z0-9_-]*\.[a-zA-Z_][a-zA-Z0-9_-]*(\[("[^"\\${}%]*"|[0-9]+)\])?$`)

// imports reads spec.imports' ids. An id from a Secret is redacted like a
// variable from one; an id from another object's field is waited for like
// a varsFrom field (notSet). Deleting, or destroying, imports nothing: a
// resource that was never imported is not in the state.
func (r *Resolver) imports(ctx context.Context, obj *infrav1.Terraform, mode Mode) (imports []*runnerpb.Import, secrets, notSet []string, err error) {
	if len(obj.Spec.Imports) == 0 || mode != Plan || obj.Spec.Destroy {
		return nil, nil, nil, nil
	}
	for _, im := range obj.Spec.Imports {
		if !importAddress.MatchString(im.To) {
			return nil, nil, nil, outcome.Stalling(infrav1.InvalidConfigurationReason,
				"spec.imports: %q is not a resource address (e.g. aws_db_instance.main or module.db.aws_db_instance.this[\"a\"])", im.To)
		}
		id, secret, waitingFor, err := r.importID(ctx, obj, im)
		if err != nil {
			return nil, nil, nil, err
		}
		if waitingFor != "" {
			notSet = append(notSet, waitingFor)
			continue
		}
		if secret {
			secrets = append(secrets, id)
		}
		imports = append(imports, &runnerpb.Import{To: im.To, Id: id})
	}
	return imports, secrets, notSet, nil
}

// importID reads one import's id: literal, from a Secret's or ConfigMap's
// key (secret reports a Secret's), or from another object's field
// (waitingFor names it while it is not set).
func (r *Resolver) importID(ctx context.Context, obj *infrav1.Terraform, im infrav1.Import) (id string, secret bool, waitingFor string, err error) {
	from := im.IDFrom
	switch {
	case from == nil:
		return im.ID, false, "", nil
	case IsDataKind(from.Kind):
		ref := infrav1.VarsReference{Kind: from.Kind, Name: from.Name, VarsKeys: []string{from.Key}}
		data, err := r.readData(ctx, obj.Namespace, ref)
		if err != nil {
			return "", false, "", err
		}
		selected, err := selectKeys(ref, data)
		if err != nil {
			return "", false, "", err
		}
		return selected[from.Key], from.Kind == "Secret", "", nil
	}
	in := RefOf(obj, from.APIVersion, from.Kind, from.Namespace, from.Name, false)
	values, waiting, err := r.fieldValues(ctx, obj, in, []infrav1.FieldVariable{{Path: from.Path, Name: "import " + im.To}})
	switch {
	case err != nil:
		return "", false, "", err
	case len(waiting) > 0:
		return "", false, in.String() + " to set " + waiting[0], nil
	}
	raw := values["import "+im.To]
	if err := json.Unmarshal(raw, &id); err != nil {
		// A number, say: its JSON text is the id.
		id = string(raw)
	}
	return id, false, "", nil
}
