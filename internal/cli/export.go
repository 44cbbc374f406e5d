package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

func (a *app) exportCommand() *cobra.Command {
	var all, allNamespaces bool
	var selector string
	cmd := &cobra.Command{
		Use:   "export [NAME | --all]",
		Short: "Print Terraform objects as clean YAML manifests, to keep in Git",
		Long: "Print Terraform objects as YAML manifests without what the API server adds\n" +
			"(uid, resourceVersion, managedFields, status), as `flux export` does: apiVersion,\n" +
			"kind, the name, namespace, labels and annotations, and the spec. Each object\n" +
			"starts with ---.",
		Example:           a.examples("export", "database > database.yaml", "--all -n team-a", "--all -A -l team=a"),
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 1 && (all || allNamespaces || selector != ""):
				return errors.New("name one Terraform object or pass --all, not both")
			case len(args) == 0 && !all:
				return fmt.Errorf("name a Terraform object or pass --all: %s", a.cmdName("export [NAME | --all]"))
			case len(args) == 1:
				return a.runExport(cmd.Context(), args[0], false, "")
			}
			return a.runExport(cmd.Context(), "", allNamespaces, selector)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "export every Terraform object of the namespace")
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "with --all, of every namespace")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "with --all, only objects with these labels, e.g. team=a")
	cmd.Flags().StringVar(&selector, "label-selector", "", "the same as --selector (flux's name for it)")
	return cmd
}

// exported is what export keeps of a Terraform object.
type exported struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   exportedMeta   `json:"metadata"`
	Spec       map[string]any `json:"spec"`
}

type exportedMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func (a *app) runExport(ctx context.Context, name string, allNamespaces bool, selector string) error {
	s, err := a.connect()
	if err != nil {
		return err
	}
	// The spec is exported as the API server stores it: a typed one
	// would add the zero values of unset fields (interval: 0s).
	gvk := v1alpha1.GroupVersion.WithKind(v1alpha1.TerraformKind)
	var objs []unstructured.Unstructured
	if name != "" {
		obj := unstructured.Unstructured{}
		obj.SetGroupVersionKind(gvk)
		err := s.c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: name}, &obj)
		if err != nil {
			return s.explain(err, "get", resTerraforms, "Terraform", s.ns, name)
		}
		objs = []unstructured.Unstructured{obj}
	} else {
		ns := s.ns
		if allNamespaces {
			ns = ""
		}
		opts := []client.ListOption{client.InNamespace(ns)}
		if selector != "" {
			sel, err := labels.Parse(selector)
			if err != nil {
				return fmt.Errorf("invalid selector %q: %v", selector, err)
			}
			opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
		}
		var list unstructured.UnstructuredList
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(v1alpha1.TerraformKind + "List"))
		if err := s.c.List(ctx, &list, opts...); err != nil {
			return s.explain(err, "list", resTerraforms, "Terraform", ns, "")
		}
		if len(list.Items) == 0 {
			where := " in namespace " + ns
			if ns == "" {
				where = ""
			}
			fmt.Fprintf(a.Streams.ErrOut, "No Terraform objects found%s.\n", where)
			return nil
		}
		objs = list.Items
		slices.SortFunc(objs, func(x, y unstructured.Unstructured) int {
			return cmp.Or(strings.Compare(x.GetNamespace(), y.GetNamespace()), strings.Compare(x.GetName(), y.GetName()))
		})
	}
	for _, obj := range objs {
		spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
		data, err := yaml.Marshal(exported{
			APIVersion: gvk.GroupVersion().String(),
			Kind:       gvk.Kind,
			Metadata:   exportedMeta{Name: obj.GetName(), Namespace: obj.GetNamespace(), Labels: obj.GetLabels(), Annotations: obj.GetAnnotations()},
			Spec:       spec,
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(a.Streams.Out, "---\n%s", data)
	}
	return nil
}
