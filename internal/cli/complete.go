package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// completeNames completes the NAME argument with the Terraform objects of
// the namespace that -n (or the kubeconfig context) selects.
func (a *app) completeNames(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return a.completeListed(cmd, &v1alpha1.TerraformList{}, true, toComplete)
}

// completeNamespaces completes -n with the namespaces the user may list
// (kubectl and flux complete it too).
func (a *app) completeNamespaces(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return a.completeListed(cmd, &corev1.NamespaceList{}, false, toComplete)
}

// completeListed offers the names of the objects list finds (in the
// session's namespace when inNamespace) that start with toComplete.
func (a *app) completeListed(cmd *cobra.Command, list client.ObjectList, inNamespace bool, toComplete string) ([]string, cobra.ShellCompDirective) {
	s, err := a.connect()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var opts []client.ListOption
	if inNamespace {
		opts = append(opts, client.InNamespace(s.ns))
	}
	if err := s.c.List(cmd.Context(), list, opts...); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	_ = apimeta.EachListItem(list, func(o runtime.Object) error {
		if name := o.(client.Object).GetName(); strings.HasPrefix(name, toComplete) {
			names = append(names, name)
		}
		return nil
	})
	return names, cobra.ShellCompDirectiveNoFileComp
}

// completeContexts completes --context with the kubeconfig's contexts.
func (a *app) completeContexts(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	raw, err := a.flags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for name := range raw.Contexts {
		if strings.HasPrefix(name, toComplete) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, cobra.ShellCompDirectiveNoFileComp
}

// completeMoreNames completes one more NAME of a command that takes
// several: the namespace's objects not named yet.
func (a *app) completeMoreNames(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	names, directive := a.completeNames(cmd, nil, toComplete)
	return slices.DeleteFunc(names, func(n string) bool { return slices.Contains(args, n) }), directive
}

// namesOrAll is the Args check of commands that take names or --all.
func (a *app) namesOrAll(all *bool, use string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case *all && len(args) > 0:
			return fmt.Errorf("--all names every object of the namespace: drop the names or --all (%s)", a.cmdName(use))
		case !*all && len(args) == 0:
			return fmt.Errorf("expected the names of Terraform objects, or --all: %s", a.cmdName(use))
		}
		return nil
	}
}

// oneName is the Args check of commands that take exactly one NAME.
func (a *app) oneName(use string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageError{a.cmdName(use)}
		}
		return nil
	}
}

type usageError struct{ usage string }

func (e usageError) Error() string {
	return "expected the name of one Terraform object: " + e.usage
}
