package inputs

import (
	"fmt"
	"strings"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/outcome"
)

// CheckNamespaces refuses references to other namespaces unless the
// controller allows them: a tenant may only use sources, inputs and
// dependencies of its own namespace. Secrets and ConfigMaps are always
// read from the object's namespace (the CRD refuses a namespace on them).
func (r *Resolver) CheckNamespaces(obj *infrav1.Terraform) error {
	if r.AllowCrossNamespaceRefs {
		return nil
	}
	var refused []string
	if ns := obj.Spec.SourceRef.Namespace; ns != "" && ns != obj.Namespace {
		refused = append(refused, fmt.Sprintf("sourceRef %s %s/%s", obj.Spec.SourceRef.Kind, ns, obj.Spec.SourceRef.Name))
	}
	for _, v := range obj.Spec.VarsFrom {
		if v.Namespace != "" && v.Namespace != obj.Namespace {
			refused = append(refused, fmt.Sprintf("varsFrom %s %s/%s", v.Kind, v.Namespace, v.Name))
		}
	}
	for _, im := range obj.Spec.Imports {
		if f := im.IDFrom; f != nil && f.Namespace != "" && f.Namespace != obj.Namespace {
			refused = append(refused, fmt.Sprintf("imports %s idFrom %s %s/%s", im.To, f.Kind, f.Namespace, f.Name))
		}
	}
	for _, d := range obj.Spec.DependsOn {
		if d.Namespace != "" && d.Namespace != obj.Namespace {
			gvk, key := DependencyKey(obj, d)
			refused = append(refused, fmt.Sprintf("dependsOn %s %s", gvk.Kind, key))
		}
	}
	if len(refused) == 0 {
		return nil
	}
	return outcome.Stalling(infrav1.CrossNamespaceRefDeniedReason,
		"references to other namespaces are not allowed: %s; move them into namespace %s (or run the controller with --no-cross-namespace-refs=false)",
		strings.Join(refused, ", "), obj.Namespace)
}
