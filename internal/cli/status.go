package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// maxEvents is how many recent events status shows.
const maxEvents = 10

func (a *app) statusCommand() *cobra.Command {
	return &cobra.Command{
		Use:               "status NAME",
		Short:             "Show conditions, revisions, the pending plan, the state lock, outputs and recent events",
		Args:              a.oneName("status NAME"),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runStatus(cmd.Context(), args[0])
		},
	}
}

func (a *app) runStatus(ctx context.Context, name string) error {
	s, obj, err := a.object(ctx, name)
	if err != nil {
		return err
	}
	w := a.Streams.Out
	kv := func(k, format string, args ...any) {
		fmt.Fprintf(w, "%-13s"+format+"\n", append([]any{k + ":"}, args...)...)
	}
	st := obj.Status

	kv("Terraform", "%s/%s", obj.Namespace, obj.Name)
	src := obj.Spec.SourceRef
	source := src.Kind + "/" + src.Name
	if src.Namespace != "" && src.Namespace != obj.Namespace {
		source = src.Kind + "/" + src.Namespace + "/" + src.Name
	}
	kv("Source", "%s, path %s", source, orDash(obj.Spec.Path))
	kv("Approval", "%s", approvalText(obj))
	if obj.Spec.Suspend {
		kv("Suspended", "yes (%s resumes it)", a.cmdName("resume "+obj.Name))
	} else {
		kv("Suspended", "no")
	}
	if ready := apimeta.FindStatusCondition(st.Conditions, meta.ReadyCondition); ready != nil {
		kv("Ready", "%s (%s): %s", ready.Status, ready.Reason, oneLine(ready.Message))
	} else {
		kv("Ready", "Unknown: waiting for the controller")
	}
	if !obj.DeletionTimestamp.IsZero() {
		kv("Deleting", "since %s", a.when(obj.DeletionTimestamp.Time))
	}

	fmt.Fprintln(w, "Revisions:")
	fmt.Fprintf(w, "  attempted: %s\n  planned:   %s\n  applied:   %s", orDash(st.LastAttemptedRevision), orDash(st.LastPlannedRevision), orDash(st.LastAppliedRevision))
	if st.LastAppliedPlan != "" {
		fmt.Fprintf(w, " (plan %s)", st.LastAppliedPlan)
	}
	fmt.Fprintln(w)

	if p := st.Plan; p != nil {
		kv("Plan", "%s, %s", orDash(p.ID), planState(obj, a.cmdName("approve "+obj.Name)))
		fmt.Fprintf(w, "  revision:  %s\n  planned:   %s\n  changes:   %d to add, %d to change, %d to destroy", orDash(p.Revision), a.when(metaTime(p.PlannedAt)), p.Add, p.Change, p.Destroy)
		switch {
		case p.IsDestroy && !obj.DeletionTimestamp.IsZero():
			fmt.Fprint(w, " (destroys everything: the object is being deleted, spec.destroyApproval manual)")
		case p.IsDestroy:
			fmt.Fprint(w, " (destroys everything: spec.destroy)")
		case p.IsDrift:
			fmt.Fprint(w, " (repairs drift)")
		}
		fmt.Fprintln(w)
		if len(p.ResourcesToReplace) > 0 {
			fmt.Fprintf(w, "  replace:   %s\n", strings.Join(p.ResourcesToReplace, ", "))
		}
		if len(p.ResourcesToDestroy) > 0 {
			fmt.Fprintf(w, "  destroy:   %s\n", strings.Join(p.ResourcesToDestroy, ", "))
		}
		if len(p.Resources) > 0 {
			fmt.Fprintln(w, "  resources:")
			if d := s.planDetailsFor(ctx, obj, p.ID); d != nil {
				for _, c := range d.Changes {
					fmt.Fprintf(w, "    %3s %s%s\n", c.symbol(), c.Address, c.note())
				}
			} else {
				for _, r := range p.Resources {
					fmt.Fprintf(w, "    %s\n", r)
				}
			}
		}
	} else {
		kv("Plan", "none yet")
	}

	if run := st.Run; run != nil {
		what := run.Action
		if run.Plan != "" {
			what += " of plan " + run.Plan
		}
		runner := run.Runner
		if runner == "" {
			runner = "waiting for a runner"
		}
		kv("Run", "%s %s, started %s", run.ID, what, a.when(metaTime(run.Started)))
		fmt.Fprintf(w, "  runner:    %s\n", runner)
	} else {
		kv("Run", "none in flight")
	}

	if l := st.Lock; l != nil {
		kv("State lock", "held by %s (lock %s) since %s", orDash(l.Holder), orDash(l.ID), a.when(metaTime(l.Since)))
		fmt.Fprintf(w, "  release a lock whose holder is gone with: %s\n", a.cmdName("unlock "+obj.Name))
	} else {
		kv("State lock", "not held")
	}

	outputs := "none"
	if len(st.AvailableOutputs) > 0 {
		outputs = strings.Join(st.AvailableOutputs, ", ")
	}
	if o := obj.Spec.WriteOutputsToSecret; o != nil {
		outputs += " (Secret " + o.Name + ")"
	}
	kv("Outputs", "%s", outputs)

	if len(st.Conditions) == 0 {
		fmt.Fprintln(w, "Conditions:  none")
		return a.printEvents(ctx, s, w, obj)
	}
	fmt.Fprintln(w, "Conditions:")
	t := newTable(w)
	t.row("  TYPE", "STATUS", "REASON", "AGE", "MESSAGE")
	for _, c := range st.Conditions {
		t.row("  "+c.Type, string(c.Status), c.Reason, a.age(c.LastTransitionTime.Time), oneLine(c.Message))
	}
	if err := t.flush(); err != nil {
		return err
	}
	return a.printEvents(ctx, s, w, obj)
}

func (a *app) printEvents(ctx context.Context, s *session, w io.Writer, obj *v1alpha1.Terraform) error {
	var list corev1.EventList
	err := s.c.List(ctx, &list, client.InNamespace(obj.Namespace), client.MatchingFields{"involvedObject.uid": string(obj.UID)})
	switch {
	case apierrors.IsForbidden(err):
		fmt.Fprintf(w, "Events:      (no permission to list events in namespace %s)\n", obj.Namespace)
		return nil
	case err != nil:
		return s.explain(err, "list", resEvents, "Event", obj.Namespace, "")
	case len(list.Items) == 0:
		fmt.Fprintln(w, "Events:      none")
		return nil
	}
	events := list.Items
	slices.SortStableFunc(events, func(x, y corev1.Event) int { return eventTime(x).Compare(eventTime(y)) })
	if len(events) > maxEvents {
		events = events[len(events)-maxEvents:]
	}
	fmt.Fprintln(w, "Events:")
	t := newTable(w)
	t.row("  TYPE", "REASON", "AGE", "MESSAGE")
	for _, e := range events {
		age := a.age(eventTime(e))
		if e.Count > 1 {
			age += fmt.Sprintf(" (x%d)", e.Count)
		}
		t.row("  "+e.Type, e.Reason, age, oneLine(e.Message))
	}
	return t.flush()
}

// eventTime is when an event last happened.
func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

func approvalText(obj *v1alpha1.Terraform) string {
	switch {
	case obj.Spec.PlanOnly:
		return "none: spec.planOnly (plans are never applied)"
	case obj.IsAutoApprove() && obj.Spec.AutoApproveDestructive:
		return "auto, also plans that destroy or replace resources (spec.autoApproveDestructive)"
	case obj.IsAutoApprove():
		return "auto, except plans that destroy or replace resources"
	case obj.Spec.ApprovePlan != "":
		return "plan " + obj.Spec.ApprovePlan + " (spec.approvePlan)"
	case obj.GetAnnotations()[v1alpha1.ApproveAnnotation] != "":
		return "manual; approved: " + obj.GetAnnotations()[v1alpha1.ApproveAnnotation]
	}
	return "manual"
}

// planState says where the last plan stands.
func planState(obj *v1alpha1.Terraform, approve string) string {
	p := obj.Status.Plan
	switch {
	case p.Pending != "" && obj.Spec.PlanOnly && obj.DeletionTimestamp.IsZero():
		return "not applied (spec.planOnly)"
	case p.Pending != "" && (obj.GetAnnotations()[v1alpha1.ApproveAnnotation] == p.Pending || obj.Spec.ApprovePlan == p.Pending):
		return "approved, waiting to be applied"
	case p.Pending != "" && heldAsDestructive(obj):
		return "waits for approval: it destroys or replaces resources, which approvePlan auto leaves to a person (" + approve + ", or spec.autoApproveDestructive: true)"
	case p.Pending != "":
		return "waits for approval (" + approve + ")"
	case p.ID != "" && p.ID == obj.Status.LastAppliedPlan:
		return "applied"
	case p.Add+p.Change+p.Destroy == 0:
		return "no changes"
	}
	return "not applied"
}

// heldAsDestructive reports a pending plan that approvePlan auto leaves to a
// person because it destroys or replaces resources, as the controller
// says in the object's conditions (reason DestructivePlanPending).
func heldAsDestructive(obj *v1alpha1.Terraform) bool {
	if obj.PendingPlan() == "" {
		return false
	}
	for _, t := range []string{meta.ReadyCondition, v1alpha1.PlannedCondition} {
		if c := apimeta.FindStatusCondition(obj.Status.Conditions, t); c != nil && c.Reason == v1alpha1.DestructivePlanPendingReason {
			return true
		}
	}
	return false
}

// destructiveChanges says what a plan destroys, "replaces a.b and destroys
// c.d", from status (addresses only); empty when it destroys nothing.
func destructiveChanges(p *v1alpha1.PlanStatus) string {
	var parts []string
	if len(p.ResourcesToReplace) > 0 {
		parts = append(parts, "replaces "+strings.Join(p.ResourcesToReplace, ", "))
	}
	if len(p.ResourcesToDestroy) > 0 {
		parts = append(parts, "destroys "+strings.Join(p.ResourcesToDestroy, ", "))
	}
	if len(parts) == 0 && p.Destroy > 0 {
		return fmt.Sprintf("destroys or replaces %d resource(s)", p.Destroy)
	}
	return strings.Join(parts, " and ")
}
