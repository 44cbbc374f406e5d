// Package migrate turns tofu-controller Terraform objects
// (infra.contrib.fluxcd.io/v1alpha2) into Landform Terraform objects: every
// field with an equivalent is mapped, the state stays where it is, and what
// cannot be mapped is reported with a reason instead of being dropped.
package migrate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// tofu-controller's API.
const (
	Group      = "infra.contrib.fluxcd.io"
	Version    = "v1alpha2"
	APIVersion = Group + "/" + Version
	Kind       = "Terraform"
	// Finalizer is tofu-controller's finalizer on its Terraform objects.
	Finalizer = "finalizers.tf.contrib.fluxcd.io"
	// DependencyFinalizerPrefix starts the finalizers tofu-controller puts
	// on the dependencies of an object ("tf.dependency.of.<name>").
	DependencyFinalizerPrefix = "tf.dependency.of."
	// defaultRunnerServiceAccount is tofu-controller's default runner
	// ServiceAccount.
	defaultRunnerServiceAccount = "tf-runner"
)

// Source is one tofu-controller Terraform object.
type Source struct {
	// Origin says where it was read: a file name, "stdin" or "cluster".
	Origin      string
	Name        string
	Namespace   string
	Labels      map[string]string
	Annotations map[string]string
	// Spec holds the spec's fields as they were written, so that every
	// field is seen, including those this package does not know.
	Spec map[string]json.RawMessage
	// Status is what tofu-controller reported, when read from the cluster.
	Status *SourceStatus
}

// SourceStatus is the part of tofu-controller's status a migration looks at.
type SourceStatus struct {
	Plan struct {
		Pending string `json:"pending,omitempty"`
	} `json:"plan,omitempty"`
	Lock struct {
		Pending string `json:"pending,omitempty"`
	} `json:"lock,omitempty"`
}

// Key is namespace/name, or the name alone without a namespace.
func (s Source) Key() string {
	if s.Namespace == "" {
		return s.Name
	}
	return s.Namespace + "/" + s.Name
}

// document is any Kubernetes object, or a List of them.
type document struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec   map[string]json.RawMessage `json:"spec"`
	Status *SourceStatus              `json:"status"`
	Items  []json.RawMessage          `json:"items"`
}

// Decode reads every YAML or JSON document of r (a List's items
// included) and returns the tofu-controller Terraform objects among them.
// skipped says, for each other document, what it was.
func Decode(r io.Reader, origin string) (objs []Source, skipped []string, err error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for n := 1; ; n++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, skipped, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: reading document %d: %w", origin, n, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || isComment(raw) {
			continue
		}
		j, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: document %d is not YAML: %w", origin, n, err)
		}
		if err := decodeJSON(j, origin, fmt.Sprintf("document %d", n), &objs, &skipped); err != nil {
			return nil, nil, err
		}
	}
}

func isComment(raw []byte) bool {
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

func decodeJSON(j []byte, origin, where string, objs *[]Source, skipped *[]string) error {
	if string(bytes.TrimSpace(j)) == "null" {
		return nil
	}
	var d document
	if err := json.Unmarshal(j, &d); err != nil {
		return fmt.Errorf("%s: %s is not a Kubernetes object: %w", origin, where, err)
	}
	if d.Items != nil && strings.HasSuffix(d.Kind, "List") {
		for i, item := range d.Items {
			if err := decodeJSON(item, origin, fmt.Sprintf("%s, item %d", where, i+1), objs, skipped); err != nil {
				return err
			}
		}
		return nil
	}
	what := fmt.Sprintf("%s %s %s", origin, d.Kind, d.Metadata.Name)
	if d.Metadata.Namespace != "" {
		what = fmt.Sprintf("%s %s %s/%s", origin, d.Kind, d.Metadata.Namespace, d.Metadata.Name)
	}
	switch {
	case d.Kind == Kind && d.APIVersion == APIVersion:
	case d.Kind == Kind && strings.HasPrefix(d.APIVersion, Group+"/"):
		*skipped = append(*skipped, fmt.Sprintf("%s: %s is not read, only %s: change its apiVersion to %s first", what, d.APIVersion, APIVersion, APIVersion))
		return nil
	default:
		*skipped = append(*skipped, fmt.Sprintf("%s (%s): not a tofu-controller Terraform, left out", what, d.APIVersion))
		return nil
	}
	if d.Metadata.Name == "" {
		return fmt.Errorf("%s: %s is a Terraform without metadata.name", origin, where)
	}
	*objs = append(*objs, Source{
		Origin:      origin,
		Name:        d.Metadata.Name,
		Namespace:   d.Metadata.Namespace,
		Labels:      d.Metadata.Labels,
		Annotations: d.Metadata.Annotations,
		Spec:        d.Spec,
		Status:      d.Status,
	})
	return nil
}

// FromObject converts an object read from the cluster (an unstructured
// object's content) into a Source.
func FromObject(obj map[string]any) (Source, error) {
	j, err := json.Marshal(obj)
	if err != nil {
		return Source{}, err
	}
	var objs []Source
	var skipped []string
	if err := decodeJSON(j, "cluster", "object", &objs, &skipped); err != nil {
		return Source{}, err
	}
	if len(objs) != 1 {
		return Source{}, fmt.Errorf("not a tofu-controller Terraform: %s", strings.Join(skipped, "; "))
	}
	return objs[0], nil
}

// varsFromRefs are the references spec.varsFrom holds.
func (s Source) varsFromRefs() []v1alpha1.VarsReference {
	var refs []v1alpha1.VarsReference
	_ = json.Unmarshal(s.Spec["varsFrom"], &refs)
	return refs
}
