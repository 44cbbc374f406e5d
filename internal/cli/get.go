package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/apis/meta"
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
	allNamespaces  bool
	watch          bool
	output         string
	selector       string
	statusSelector string
	noHeader       bool
}

func (a *app) getCommand() *cobra.Command {
	var o getOptions
	cmd := &cobra.Command{
		Use:               "get [NAME]",
		Short:             "List Terraform objects (or show one) with their readiness, pending plan and last applied revision",
		Example:           a.examples("get", "-n team-a", "-A -w", "-A --status-selector ready=false --no-header", "database -o yaml"),
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
	f.StringVarP(&o.selector, "selector", "l", "", "label selector, e.g. team=a")
	f.StringVar(&o.selector, "label-selector", "", "the same as --selector (flux's name for it)")
	f.StringVar(&o.statusSelector, "status-selector", "", "only objects whose condition has this status, e.g. ready=false or ready!=true")
	f.BoolVar(&o.noHeader, "no-header", false, "print the table without its header")
	a.outputFlag(cmd, &o.output, "print the objects as json or yaml instead of a table")
	return cmd
}

func (a *app) runGet(ctx context.Context, name string, o getOptions) error {
	if name != "" && o.allNamespaces {
		return errors.New("a Terraform object cannot be named across all namespaces: drop -A or the name")
	}
	if err := checkOutput(o.output); err != nil {
		return err
	}
	match, err := parseStatusSelector(o.statusSelector)
	if err != nil {
		return err
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

	list.Items = slices.DeleteFunc(list.Items, func(obj v1alpha1.Terraform) bool { return !match(&obj) })
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
		where := ""
		if !o.allNamespaces {
			where = " in namespace " + ns
		}
		if o.statusSelector != "" {
			where += " with " + o.statusSelector
		}
		fmt.Fprintf(a.Streams.ErrOut, "No Terraform objects found%s.\n", where)
	} else {
		a.header(t, o)
		for i := range list.Items {
			a.row(t, &list.Items[i], o.allNamespaces)
		}
	}
	if err := t.flush(); err != nil || !o.watch {
		return err
	}
	if len(list.Items) == 0 {
		a.header(t, o)
	}
	return a.watchRows(ctx, s, t, list.ResourceVersion, opts, o.allNamespaces, match)
}

// The columns of `get`: Flux's (REVISION, SUSPENDED, READY, and the
// message last), with the plan and the age.
func (a *app) header(t *tableWriter, o getOptions) {
	if o.noHeader {
		return
	}
	cells := []string{"NAME", "REVISION", "SUSPENDED", "READY", "PLAN", "AGE", "STATUS"}
	if o.allNamespaces {
		cells = append([]string{"NAMESPACE"}, cells...)
	}
	t.row(cells...)
}

func (a *app) row(t *tableWriter, obj *v1alpha1.Terraform, allNamespaces bool) {
	cells := []string{
		obj.Name,
		shortRevision(revisionColumn(obj)),
		suspendedColumn(obj),
		readyStatus(obj),
		planColumn(obj),
		a.age(obj.CreationTimestamp.Time),
		truncate(oneLine(statusText(obj)), statusWidth),
	}
	if allNamespaces {
		cells = append([]string{obj.Namespace}, cells...)
	}
	t.row(cells...)
}

// revisionColumn is the revision applied; a preview's, planned (it
// applies nothing).
func revisionColumn(obj *v1alpha1.Terraform) string {
	if obj.IsPreview() {
		return obj.Status.LastPlannedRevision
	}
	return obj.Status.LastAppliedRevision
}

// suspendedColumn is spec.suspend as Flux prints it.
func suspendedColumn(obj *v1alpha1.Terraform) string {
	if obj.Spec.Suspend {
		return "True"
	}
	return "False"
}

// parseStatusSelector reads --status-selector, TYPE=STATUS or
// TYPE!=STATUS as `flux get` takes it (case does not matter), into a
// filter. An object without the condition has it Unknown for Ready (as
// the READY column shows it) and False for Reconciling and Stalled (kstatus'
// abnormal-true conditions); any other missing condition matches no
// TYPE=STATUS.
func parseStatusSelector(sel string) (func(*v1alpha1.Terraform) bool, error) {
	if sel == "" {
		return func(*v1alpha1.Terraform) bool { return true }, nil
	}
	sep, negate := "=", false
	if strings.Contains(sel, "!=") {
		sep, negate = "!=", true
	}
	typ, want, ok := strings.Cut(sel, sep)
	typ, want = strings.TrimSpace(typ), strings.TrimSpace(want)
	if !ok || typ == "" || strings.ContainsAny(want, "=!") {
		return nil, fmt.Errorf("invalid --status-selector %q: use TYPE=STATUS or TYPE!=STATUS, e.g. ready=false", sel)
	}
	var status metav1.ConditionStatus
	for _, s := range []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown} {
		if strings.EqualFold(want, string(s)) {
			status = s
		}
	}
	if status == "" {
		return nil, fmt.Errorf("invalid --status-selector %q: the status is True, False or Unknown", sel)
	}
	return func(obj *v1alpha1.Terraform) bool {
		var got metav1.ConditionStatus
		for _, c := range obj.Status.Conditions {
			if strings.EqualFold(c.Type, typ) {
				got = c.Status
			}
		}
		if got == "" {
			switch {
			case strings.EqualFold(typ, meta.ReadyCondition):
				got = metav1.ConditionUnknown
			case strings.EqualFold(typ, meta.ReconcilingCondition), strings.EqualFold(typ, meta.StalledCondition):
				got = metav1.ConditionFalse
			}
		}
		return (got == status) != negate
	}, nil
}

// watchRows prints a row for every change after resourceVersion until ctx
// ends, watching again when the API server closes the watch.
func (a *app) watchRows(ctx context.Context, s *session, t *tableWriter, resourceVersion string, opts []client.ListOption, allNamespaces bool, match func(*v1alpha1.Terraform) bool) error {
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
			if !match(obj) {
				continue
			}
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
