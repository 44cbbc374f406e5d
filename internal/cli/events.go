package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
)

type eventsOptions struct {
	follow        bool
	allNamespaces bool
	types         []string
	output        string
}

func (a *app) eventsCommand() *cobra.Command {
	var o eventsOptions
	cmd := &cobra.Command{
		Use:   "events [NAME]",
		Short: "Show the Kubernetes events of Terraform objects and of their runner Pods",
		Long: "Show the Kubernetes events of a Terraform object and of its runner Pods (also\n" +
			"of Pods already gone), oldest first, as `flux events` does for Flux's kinds.\n" +
			"Without NAME, those of every Terraform object of the namespace (-A: of every\n" +
			"namespace). --types keeps events of these types (Normal, Warning).\n" +
			"With -w, print new events as they come until interrupted.",
		Example:           a.examples("events", "database", "database -w", "-A --types Warning", "database -o json"),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) > 1:
				return fmt.Errorf("expected at most one Terraform object: %s", a.cmdName("events [NAME]"))
			case len(args) == 1 && o.allNamespaces:
				return fmt.Errorf("-A lists the events of every namespace: drop NAME or -A (%s)", a.cmdName("events [NAME]"))
			case o.follow && o.output != "":
				return errors.New("-o prints the events once: drop -w or -o")
			}
			for _, typ := range o.types {
				if typ != corev1.EventTypeNormal && typ != corev1.EventTypeWarning {
					return fmt.Errorf("--types %q: the types are Normal and Warning", typ)
				}
			}
			if err := checkOutput(o.output); err != nil {
				return err
			}
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return a.runEvents(cmd.Context(), name, o)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.follow, "watch", "w", false, "after listing, print new events until interrupted")
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "the events of the Terraform objects of every namespace")
	f.StringSliceVar(&o.types, "types", nil, "only events of these types: Normal, Warning (comma-separated)")
	a.outputFlag(cmd, &o.output, "print the events as json or yaml (a list, oldest first)")
	_ = cmd.RegisterFlagCompletionFunc("types", cobra.FixedCompletions([]string{corev1.EventTypeNormal, corev1.EventTypeWarning}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// eventResult is one event as -o prints it.
type eventResult struct {
	Namespace string    `json:"namespace"`
	Object    string    `json:"object"`
	Type      string    `json:"type"`
	Reason    string    `json:"reason"`
	Message   string    `json:"message"`
	Count     int32     `json:"count,omitempty"`
	Last      time.Time `json:"lastTimestamp"`
}

func (a *app) runEvents(ctx context.Context, name string, o eventsOptions) error {
	s, err := a.connect()
	if err != nil {
		return err
	}
	ns, what := s.ns, "Terraform objects of namespace "+s.ns
	var about func(corev1.Event) bool
	switch {
	case name != "":
		obj, err := s.terraform(ctx, name)
		if err != nil {
			return err
		}
		ns, what = obj.Namespace, fmt.Sprintf("Terraform %s/%s", obj.Namespace, obj.Name)
		about = func(e corev1.Event) bool { return aboutTerraform(e, obj) }
	default:
		if o.allNamespaces {
			ns, what = "", "Terraform objects"
		}
		var objs v1alpha1.TerraformList
		if err := s.c.List(ctx, &objs, client.InNamespace(ns)); err != nil {
			return s.explain(err, "list", resTerraforms, "Terraform", ns, "")
		}
		about = func(e corev1.Event) bool {
			return slices.ContainsFunc(objs.Items, func(obj v1alpha1.Terraform) bool {
				return e.InvolvedObject.Namespace == obj.Namespace && aboutTerraform(e, &obj)
			})
		}
	}
	keep := func(e corev1.Event) bool {
		return about(e) && (len(o.types) == 0 || slices.Contains(o.types, e.Type))
	}
	// Events about Pods outlive them, so runner Pods are recognised by
	// name, not listed.
	var list corev1.EventList
	if err := s.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return s.explain(err, "list", resEvents, "Event", ns, "")
	}
	events := slices.DeleteFunc(list.Items, func(e corev1.Event) bool { return !keep(e) })
	slices.SortStableFunc(events, func(x, y corev1.Event) int { return eventTime(x).Compare(eventTime(y)) })

	if o.output != "" {
		out := make([]eventResult, 0, len(events))
		for _, e := range events {
			out = append(out, eventResult{Namespace: e.Namespace, Object: e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name,
				Type: e.Type, Reason: e.Reason, Message: e.Message, Count: e.Count, Last: eventTime(e)})
		}
		return printData(a.Streams.Out, o.output, out)
	}
	t := newTable(a.Streams.Out)
	if len(events) == 0 && !o.follow {
		fmt.Fprintf(a.Streams.ErrOut, "No events found for %s.\n", what)
		return nil
	}
	header := []string{"LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"}
	if o.allNamespaces {
		header = append([]string{"NAMESPACE"}, header...)
	}
	t.row(header...)
	for _, e := range events {
		a.eventRow(t, e, o.allNamespaces)
	}
	if err := t.flush(); err != nil || !o.follow {
		return err
	}

	w, err := s.c.Watch(ctx, &corev1.EventList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		return s.explain(err, "watch", resEvents, "Event", ns, "")
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("the API server ended the watch of the events of %s: run the command again", what)
			}
			e, isEvent := ev.Object.(*corev1.Event)
			if (ev.Type != watch.Added && ev.Type != watch.Modified) || !isEvent || !keep(*e) {
				continue
			}
			a.eventRow(t, *e, o.allNamespaces)
			if err := t.flush(); err != nil {
				return err
			}
		}
	}
}

// aboutTerraform says whether e is about obj or one of its runner Pods.
func aboutTerraform(e corev1.Event, obj *v1alpha1.Terraform) bool {
	o := e.InvolvedObject
	switch o.Kind {
	case v1alpha1.TerraformKind:
		return o.Name == obj.Name && (o.UID == "" || o.UID == obj.UID)
	case "Pod":
		return o.APIVersion == "v1" && names.IsRunnerPodName(o.Name, obj.Name)
	}
	return false
}

func (a *app) eventRow(t *tableWriter, e corev1.Event, withNamespace bool) {
	cells := []string{a.lastSeen(e), e.Type, e.Reason, e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name, oneLine(e.Message)}
	if withNamespace {
		cells = append([]string{e.Namespace}, cells...)
	}
	t.row(cells...)
}

// lastSeen is flux events' LAST SEEN: the age of the first occurrence, or
// for a repeated event of the last one, with how often over how long.
func (a *app) lastSeen(e corev1.Event) string {
	first := a.ageOrUnknown(e.EventTime.Time)
	if e.EventTime.IsZero() {
		first = a.ageOrUnknown(e.FirstTimestamp.Time)
	}
	switch {
	case e.Series != nil:
		return fmt.Sprintf("%s (x%d over %s)", a.ageOrUnknown(e.Series.LastObservedTime.Time), e.Series.Count, first)
	case e.Count > 1:
		return fmt.Sprintf("%s (x%d over %s)", a.ageOrUnknown(e.LastTimestamp.Time), e.Count, first)
	}
	return first
}

func (a *app) ageOrUnknown(t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return a.age(t)
}
