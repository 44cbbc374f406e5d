package cli

import (
	"context"
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

func (a *app) eventsCommand() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "events NAME",
		Short: "Show the Kubernetes events of a Terraform object and of its runner Pods",
		Long: "Show the Kubernetes events of a Terraform object and of its runner Pods (also\n" +
			"of Pods already gone), oldest first, as `flux events` does for Flux's kinds.\n" +
			"With -w, print new events as they come until interrupted.",
		Example:           a.examples("events", "database", "database -w"),
		Args:              a.oneName("events NAME"),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runEvents(cmd.Context(), args[0], follow)
		},
	}
	cmd.Flags().BoolVarP(&follow, "watch", "w", false, "after listing, print new events until interrupted")
	return cmd
}

func (a *app) runEvents(ctx context.Context, name string, follow bool) error {
	s, obj, err := a.object(ctx, name)
	if err != nil {
		return err
	}
	// Events about Pods outlive them, so runner Pods are recognised by
	// name, not listed.
	var list corev1.EventList
	if err := s.c.List(ctx, &list, client.InNamespace(obj.Namespace)); err != nil {
		return s.explain(err, "list", resEvents, "Event", obj.Namespace, "")
	}
	events := slices.DeleteFunc(list.Items, func(e corev1.Event) bool { return !aboutTerraform(e, obj) })
	slices.SortStableFunc(events, func(x, y corev1.Event) int { return eventTime(x).Compare(eventTime(y)) })

	t := newTable(a.Streams.Out)
	if len(events) == 0 && !follow {
		fmt.Fprintf(a.Streams.ErrOut, "No events found for Terraform %s/%s.\n", obj.Namespace, obj.Name)
		return nil
	}
	t.row("LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE")
	for _, e := range events {
		a.eventRow(t, e)
	}
	if err := t.flush(); err != nil || !follow {
		return err
	}

	w, err := s.c.Watch(ctx, &corev1.EventList{}, client.InNamespace(obj.Namespace), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		return s.explain(err, "watch", resEvents, "Event", obj.Namespace, "")
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("the API server ended the watch of events in namespace %s: run the command again", obj.Namespace)
			}
			e, isEvent := ev.Object.(*corev1.Event)
			if (ev.Type != watch.Added && ev.Type != watch.Modified) || !isEvent || !aboutTerraform(*e, obj) {
				continue
			}
			a.eventRow(t, *e)
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

func (a *app) eventRow(t *tableWriter, e corev1.Event) {
	t.row(a.lastSeen(e), e.Type, e.Reason, e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name, oneLine(e.Message))
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
