package inputs

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// IndexKeys keys an object by the inputs it reads: DataKey for a Secret
// or ConfigMap of its namespace, ObjectKey for any other object (varsFrom's
// and imports' idFrom alike). A change of one wakes the objects indexed
// under its key.
func IndexKeys(tf *infrav1.Terraform) []string {
	keys := make([]string, 0, len(tf.Spec.VarsFrom)+len(tf.Spec.Imports))
	add := func(apiVersion, kind, namespace, name string) {
		if IsDataKind(kind) {
			keys = append(keys, DataKey(kind, name))
			return
		}
		in := RefOf(tf, apiVersion, kind, namespace, name, false)
		keys = append(keys, ObjectKey(in.GVK(), in.Namespace, in.Name))
	}
	for _, v := range tf.Spec.VarsFrom {
		add(v.APIVersion, v.Kind, v.Namespace, v.Name)
	}
	for _, im := range tf.Spec.Imports {
		if f := im.IDFrom; f != nil {
			add(f.APIVersion, f.Kind, f.Namespace, f.Name)
		}
	}
	return keys
}

// DataKey is the index key of a Secret or ConfigMap (kind) name of the
// object's namespace.
func DataKey(kind, name string) string { return kind + "/" + name }

// ObjectKey is the index key of an object whose fields are inputs: its
// group, kind, namespace and name (not its version: the watch may be on
// another version of the same kind).
func ObjectKey(gvk schema.GroupVersionKind, namespace, name string) string {
	return gvk.Group + "/" + gvk.Kind + "/" + namespace + "/" + name
}
