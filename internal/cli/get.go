package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

type getOptions struct {
	allNamespaces bool
	watch         bool
	output        string
	selector      string
}

func (a *app) getCommand() *cobra.Command {
	var o getOptions
	cmd := &cobra.Command{
		Use:   "get [NAME]",
		Short: "List Terraform objects (or show one) with their readiness, pending plan and last applied revision",
		Example: "  " + a.cmdName("get") + " -n team-a\n" +
			"  " + a.cmdName("get") + " -A -w\n" +
			"  " + a.cmdName("get") + " database -o yaml",
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return a.runGet(cmd.Context(), name, o)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list the objects of every namespace")
	f.BoolVarP(&o.watch, "watch", "w", false, "after listing, print every change until interrupted")
	f.StringVarP(&o.output, "output", "o", "", "print the objects as json or yaml instead of a table")
	f.StringVarP(&o.selector, "selector", "l", "", "label selector, e.g. team=a")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (a *app) runGet(ctx context.Context, name string, o getOptions) error {
	if name != "" && o.allNamespaces {
		return errors.New("a Terraform object cannot be named across all namespaces: drop -A or the name")
	}
	if o.output != "" && o.output != "json" && o.output != "yaml" {
		return badOutput(o.output)
	}
	if o.watch && o.output != "" {
		return errors.New("-w prints a table: drop -o")
	}
	s, err := a.connect()
	if err != nil {
		return err
	}
	ns := s.ns
	if o.allNamespaces {
		ns = ""
	}
	opts := []client.ListOption{client.InNamespace(ns)}
	if o.selector != "" {
		sel, err := labels.Parse(o.selector)
		if err != nil {
			return fmt.Errorf("invalid selector %q: %v", o.selector, err)
		}
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
	}
	if name != "" {
		opts = append(opts, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)})
	}

	var list v1alpha1.TerraformList
	if name != "" {
		// One object is read with get, which needs no list permission.
		obj, err := s.terraform(ctx, name)
		if err != nil {
			return err
		}
		list.Items, list.ResourceVersion = []v1alpha1.Terraform{*obj}, obj.ResourceVersion
	} else if err := s.c.List(ctx, &list, opts...); err != nil {
		return s.explain(err, "list", resTerraforms, "Terraform", ns, "")
	}

	slices.SortFunc(list.Items, func(x, y v1alpha1.Terraform) int {
		return cmp.Or(strings.Compare(x.Namespace, y.Namespace), strings.Compare(x.Name, y.Name))
	})

	switch o.output {
	case "json", "yaml":
		if name != "" {
			return printObject(a.Streams.Out, o.output, withKind(&list.Items[0]))
		}
		list.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(v1alpha1.TerraformKind + "List"))
		for i := range list.Items {
			withKind(&list.Items[i])
		}
		return printObject(a.Streams.Out, o.output, &list)
	}

	t := newTable(a.Streams.Out)
	if len(list.Items) == 0 {
		if o.allNamespaces {
			fmt.Fprintln(a.Streams.ErrOut, "No Terraform objects found.")
		} else {
			fmt.Fprintf(a.Streams.ErrOut, "No Terraform objects found in namespace %s.\n", ns)
		}
	} else {
		a.header(t, o.allNamespaces)
		for i := range list.Items {
			a.row(t, &list.Items[i], o.allNamespaces)
		}
	}
	if err := t.flush(); err != nil || !o.watch {
		return err
	}
	if len(list.Items) == 0 {
		a.header(t, o.allNamespaces)
	}
	return a.watchRows(ctx, s, t, list.ResourceVersion, opts, o.allNamespaces)
}

func (a *app) header(t *tableWriter, allNamespaces bool) {
	cells := []string{"NAME", "READY", "STATUS", "PLAN", "LAST APPLIED", "AGE"}
	if allNamespaces {
		cells = append([]string{"NAMESPACE"}, cells...)
	}
	t.row(cells...)
}

func (a *app) row(t *tableWriter, obj *v1alpha1.Terraform, allNamespaces bool) {
	cells := []string{
		obj.Name,
		readyStatus(obj),
		truncate(oneLine(statusText(obj)), statusWidth),
		planColumn(obj),
		shortRevision(obj.Status.LastAppliedRevision),
		a.age(obj.CreationTimestamp.Time),
	}
	if allNamespaces {
		cells = append([]string{obj.Namespace}, cells...)
	}
	t.row(cells...)
}

// watchRows prints a row for every change after resourceVersion until ctx
// ends, watching again when the API server closes the watch.
func (a *app) watchRows(ctx context.Context, s *session, t *tableWriter, resourceVersion string, opts []client.ListOption, allNamespaces bool) error {
	ns := ""
	for _, o := range opts {
		if in, ok := o.(client.InNamespace); ok {
			ns = string(in)
		}
	}
	for ctx.Err() == nil {
		raw := &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: resourceVersion, AllowWatchBookmarks: true}}
		w, err := s.c.Watch(ctx, &v1alpha1.TerraformList{}, append(opts, raw)...)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return s.explain(err, "watch", resTerraforms, "Terraform", ns, "")
		}
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Error:
				// The resource version is too old: start again from now, as
				// kubectl does, which lists the current objects once more.
				if apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)) || apierrors.IsGone(apierrors.FromObject(ev.Object)) {
					resourceVersion = ""
				}
				continue
			case watch.Bookmark:
				if obj, ok := ev.Object.(*v1alpha1.Terraform); ok {
					resourceVersion = obj.ResourceVersion
				}
				continue
			}
			obj, ok := ev.Object.(*v1alpha1.Terraform)
			if !ok {
				continue
			}
			resourceVersion = obj.ResourceVersion
			a.row(t, obj, allNamespaces)
			if err := t.flush(); err != nil {
				w.Stop()
				return err
			}
		}
		w.Stop()
	}
	return nil
}
