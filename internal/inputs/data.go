package inputs

import (
	"context"
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/outcome"
)

// IsDataKind reports whether kind is read by keys (Secret, ConfigMap)
// rather than by field paths.
func IsDataKind(kind string) bool { return kind == "Secret" || kind == "ConfigMap" }

// readData reads a Secret's or ConfigMap's data; nil for a missing
// optional one.
func (r *Resolver) readData(ctx context.Context, namespace string, ref infrav1.VarsReference) (map[string]string, error) {
	key := client.ObjectKey{Namespace: namespace, Name: ref.Name}
	data := map[string]string{}
	var err error
	switch ref.Kind {
	case "Secret":
		s := &corev1.Secret{}
		if err = r.Reader.Get(ctx, key, s); err == nil {
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
	case "ConfigMap":
		cm := &corev1.ConfigMap{}
		if err = r.Reader.Get(ctx, key, cm); err == nil {
			for k, v := range cm.Data {
				data[k] = v
			}
		}
	}
	switch {
	case apierrors.IsNotFound(err) && ref.Optional:
		return nil, nil
	case apierrors.IsNotFound(err):
		return nil, outcome.Retry(infrav1.VarsNotFoundReason, "varsFrom %s %s/%s not found: create it, or mark the reference optional", ref.Kind, namespace, ref.Name)
	case err != nil:
		return nil, outcome.Retry(infrav1.VarsNotFoundReason, "reading varsFrom %s %s/%s: %v", ref.Kind, namespace, ref.Name, err)
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
			return nil, outcome.Retry(infrav1.VarsNotFoundReason, "varsFrom %s %s has no key %q: add it, fix varsKeys, or mark the reference optional", ref.Kind, ref.Name, key)
		}
		out[name] = v
	}
	return out, nil
}

// varValue passes JSON objects and lists as structured values and
// anything else as a string; the engine converts strings to numbers and
// bools where the variable's type asks for them.
func varValue(s string) json.RawMessage {
	t := strings.TrimSpace(s)
	if (strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[")) && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(s)
	return b
}
