package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/approval"
	"github.com/landform-dev/landform/internal/planview"
)

// maxEvents is how many recent events status shows.
const maxEvents = 10

func (a *app) statusCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:               "status NAME",
		Short:             "Show conditions, revisions, the pending plan, the state lock, outputs and recent events",
		Example:           a.examples("status", "database", "database -o json"),
		Args:              a.oneName("status NAME"),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			return a.runStatus(cmd.Context(), args[0], output)
		},
	}
	a.outputFlag(cmd, &output, "print the status as json or yaml")
	return cmd
}

// statusReport is what `status` shows, and prints with -o json|yaml.
type statusReport struct {
	Namespace     string               `json:"namespace"`
	Name          string               `json:"name"`
	Source        sourceResult         `json:"source"`
	Path          string               `json:"path,omitempty"`
	Approval      string               `json:"approval"`
	Suspended     bool                 `json:"suspended"`
	DeletingSince *metav1.Time         `json:"deletingSince,omitempty"`
	Ready         *conditionResult     `json:"ready,omitempty"`
	Revisions     revisionsReport      `json:"revisions"`
	Plan          *planReport          `json:"plan,omitempty"`
	Run           *runReport           `json:"run,omitempty"`
	Lock          *v1alpha1.LockStatus `json:"lock,omitempty"`
	// Preview is the snapshot a preview's last plan started from.
	Preview *v1alpha1.PreviewStatus `json:"preview,omitempty"`
	Outputs []string                `json:"outputs"`
	// OutputsSecret is spec.writeOutputsToSecret.name.
	OutputsSecret string             `json:"outputsSecret,omitempty"`
	Conditions    []metav1.Condition `json:"conditions"`
	// Events are the last ten events about the object, oldest first.
	Events []eventReport `json:"events"`
	// EventsError says why events could not be listed.
	EventsError string `json:"eventsError,omitempty"`
}

type revisionsReport struct {
	Attempted   string `json:"attempted,omitempty"`
	Planned     string `json:"planned,omitempty"`
	Applied     string `json:"applied,omitempty"`
	AppliedPlan string `json:"appliedPlan,omitempty"`
}

type planReport struct {
	ID string `json:"id,omitempty"`
	// Pending is set while the plan waits for approval (or planOnly keeps it).
	Pending bool `json:"pending"`
	// State is pending-approval, approved, plan-only, preview, applied, no-changes
	// or not-applied; Description says it in words.
	State       string       `json:"state"`
	Description string       `json:"description"`
	Revision    string       `json:"revision,omitempty"`
	PlannedAt   *metav1.Time `json:"plannedAt,omitempty"`
	Add         int32        `json:"add"`
	Change      int32        `json:"change"`
	Destroy     int32        `json:"destroy"`
	// IsDestroy: the plan destroys everything (spec.destroy, or deletion).
	IsDestroy          bool     `json:"isDestroy,omitempty"`
	IsDrift            bool     `json:"isDrift,omitempty"`
	ResourcesToReplace []string `json:"resourcesToReplace,omitempty"`
	ResourcesToDestroy []string `json:"resourcesToDestroy,omitempty"`
	// Resources are the changed resources, with terraform's actions when
	// the stored plan could be read.
	Resources []resourceReport `json:"resources,omitempty"`
}

type resourceReport struct {
	Address string   `json:"address"`
	Actions []string `json:"actions,omitempty"`
	Import  bool     `json:"import,omitempty"`
	Deposed bool     `json:"deposed,omitempty"`
	// change is what the text prints; nil when only the address is known.
	change *planview.Change
}

type runReport struct {
	ID       string       `json:"id"`
	Action   string       `json:"action"`
	Plan     string       `json:"plan,omitempty"`
	Runner   string       `json:"runner,omitempty"`
	Started  *metav1.Time `json:"started,omitempty"`
	Revision string       `json:"revision,omitempty"`
}

type eventReport struct {
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Count   int32     `json:"count,omitempty"`
	Last    time.Time `json:"lastTimestamp"`
}

func (a *app) runStatus(ctx context.Context, name, format string) error {
	s, obj, err := a.object(ctx, name)
	if err != nil {
		return err
	}
	r, err := a.statusOf(ctx, s, obj)
	if err != nil {
		return err
	}
	if format != "" {
		return printData(a.Streams.Out, format, r)
	}
	return a.printStatus(a.Streams.Out, r)
}

// statusOf gathers the report: the object's status, its stored plan's
// resource changes and its events.
func (a *app) statusOf(ctx context.Context, s *session, obj *v1alpha1.Terraform) (*statusReport, error) {
	st := obj.Status
	src := obj.Spec.SourceRef
	r := &statusReport{
		Namespace: obj.Namespace, Name: obj.Name,
		Source:     sourceResult{Kind: src.Kind, Namespace: cmp.Or(src.Namespace, obj.Namespace), Name: src.Name},
		Path:       obj.Spec.Path,
		Approval:   approvalText(obj),
		Suspended:  obj.Spec.Suspend,
		Ready:      readyResult(obj),
		Revisions:  revisionsReport{Attempted: st.LastAttemptedRevision, Planned: st.LastPlannedRevision, Applied: st.LastAppliedRevision, AppliedPlan: st.LastAppliedPlan},
		Lock:       st.Lock,
		Preview:    st.Preview,
		Outputs:    st.AvailableOutputs,
		Conditions: st.Conditions,
	}
	if !obj.DeletionTimestamp.IsZero() {
		r.DeletingSince = obj.DeletionTimestamp
	}
	if r.Outputs == nil {
		r.Outputs = []string{}
	}
	if r.Conditions == nil {
		r.Conditions = []metav1.Condition{}
	}
	if o := obj.Spec.WriteOutputsToSecret; o != nil {
		r.OutputsSecret = o.Name
	}
	if p := st.Plan; p != nil {
		state, description := planState(obj, a.cmdName("approve "+obj.Name))
		r.Plan = &planReport{
			ID: p.ID, Pending: p.Pending != "", State: state, Description: description,
			Revision: p.Revision, PlannedAt: p.PlannedAt, Add: p.Add, Change: p.Change, Destroy: p.Destroy,
			IsDestroy: p.IsDestroy, IsDrift: p.IsDrift, ResourcesToReplace: p.ResourcesToReplace, ResourcesToDestroy: p.ResourcesToDestroy,
		}
		if len(p.Resources) > 0 {
			if d := s.planDetailsFor(ctx, obj, p.ID); d != nil {
				for _, c := range d.Changes {
					actions := make([]string, len(c.Actions))
					for i, act := range c.Actions {
						actions[i] = string(act)
					}
					r.Plan.Resources = append(r.Plan.Resources, resourceReport{Address: c.Address, Actions: actions, Import: c.Import, Deposed: c.Deposed, change: &c})
				}
			} else {
				for _, addr := range p.Resources {
					r.Plan.Resources = append(r.Plan.Resources, resourceReport{Address: addr})
				}
			}
		}
	}
	if run := st.Run; run != nil {
		r.Run = &runReport{ID: run.ID, Action: run.Action, Plan: run.Plan, Runner: run.Runner, Started: run.Started, Revision: run.Revision}
	}
	events, err := s.recentEvents(ctx, obj)
	switch {
	case apierrors.IsForbidden(err):
		r.EventsError = fmt.Sprintf("no permission to list events in namespace %s", obj.Namespace)
	case err != nil:
		return nil, s.explain(err, "list", resEvents, "Event", obj.Namespace, "")
	}
	r.Events = []eventReport{}
	for _, e := range events {
		r.Events = append(r.Events, eventReport{Type: e.Type, Reason: e.Reason, Message: e.Message, Count: e.Count, Last: eventTime(e)})
	}
	return r, nil
}

// printStatus prints the report for a person.
func (a *app) printStatus(w io.Writer, r *statusReport) error {
	kv := func(k, format string, args ...any) {
		fmt.Fprintf(w, "%-13s"+format+"\n", append([]any{k + ":"}, args...)...)
	}

	kv("Terraform", "%s/%s", r.Namespace, r.Name)
	source := r.Source.Kind + "/" + r.Source.Name
	if r.Source.Namespace != r.Namespace {
		source = r.Source.Kind + "/" + r.Source.Namespace + "/" + r.Source.Name
	}
	kv("Source", "%s, path %s", source, orDash(r.Path))
	kv("Approval", "%s", r.Approval)
	if r.Suspended {
		kv("Suspended", "yes (%s resumes it)", a.cmdName("resume "+r.Name))
	} else {
		kv("Suspended", "no")
	}
	if ready := r.Ready; ready != nil {
		kv("Ready", "%s (%s): %s", ready.Status, ready.Reason, oneLine(ready.Message))
	} else {
		kv("Ready", "Unknown: waiting for the controller")
	}
	if r.DeletingSince != nil {
		kv("Deleting", "since %s", a.when(r.DeletingSince.Time))
	}
	if p := r.Preview; p != nil {
		after := ""
		if p.TargetAppliedPlan != "" {
			after = ", after plan " + p.TargetAppliedPlan
		}
		kv("Preview", "of %s: state serial %d%s, snapshot taken %s", cmp.Or(p.Target, "an empty state"), p.StateSerial, after, a.when(metaTime(p.SnapshotAt)))
	}

	rev := r.Revisions
	fmt.Fprintln(w, "Revisions:")
	fmt.Fprintf(w, "  attempted: %s\n  planned:   %s\n  applied:   %s", orDash(rev.Attempted), orDash(rev.Planned), orDash(rev.Applied))
	if rev.AppliedPlan != "" {
		fmt.Fprintf(w, " (plan %s)", rev.AppliedPlan)
	}
	fmt.Fprintln(w)

	if p := r.Plan; p != nil {
		kv("Plan", "%s, %s", orDash(p.ID), p.Description)
		fmt.Fprintf(w, "  revision:  %s\n  planned:   %s\n  changes:   %d to add, %d to change, %d to destroy", orDash(p.Revision), a.when(metaTime(p.PlannedAt)), p.Add, p.Change, p.Destroy)
		switch {
		case p.IsDestroy && r.DeletingSince != nil:
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
			for _, res := range p.Resources {
				if c := res.change; c != nil {
					fmt.Fprintf(w, "    %3s %s%s\n", c.Symbol(), c.Address, c.Note())
				} else {
					fmt.Fprintf(w, "    %s\n", res.Address)
				}
			}
		}
	} else {
		kv("Plan", "none yet")
	}

	if run := r.Run; run != nil {
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

	if l := r.Lock; l != nil {
		kv("State lock", "held by %s (lock %s) since %s", orDash(l.Holder), orDash(l.ID), a.when(metaTime(l.Since)))
		fmt.Fprintf(w, "  release a lock whose holder is gone with: %s\n", a.cmdName("unlock "+r.Name))
	} else {
		kv("State lock", "not held")
	}

	outputs := "none"
	if len(r.Outputs) > 0 {
		outputs = strings.Join(r.Outputs, ", ")
	}
	if r.OutputsSecret != "" {
		outputs += " (Secret " + r.OutputsSecret + ")"
	}
	kv("Outputs", "%s", outputs)

	if len(r.Conditions) == 0 {
		fmt.Fprintln(w, "Conditions:  none")
	} else {
		fmt.Fprintln(w, "Conditions:")
		t := newTable(w)
		t.row("  TYPE", "STATUS", "REASON", "AGE", "MESSAGE")
		for _, c := range r.Conditions {
			t.row("  "+c.Type, string(c.Status), c.Reason, a.age(c.LastTransitionTime.Time), oneLine(c.Message))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}

	switch {
	case r.EventsError != "":
		fmt.Fprintf(w, "Events:      (%s)\n", r.EventsError)
		return nil
	case len(r.Events) == 0:
		fmt.Fprintln(w, "Events:      none")
		return nil
	}
	fmt.Fprintln(w, "Events:")
	t := newTable(w)
	t.row("  TYPE", "REASON", "AGE", "MESSAGE")
	for _, e := range r.Events {
		age := a.age(e.Last)
		if e.Count > 1 {
			age += fmt.Sprintf(" (x%d)", e.Count)
		}
		t.row("  "+e.Type, e.Reason, age, oneLine(e.Message))
	}
	return t.flush()
}

// recentEvents are the last maxEvents events about obj, oldest first.
func (s *session) recentEvents(ctx context.Context, obj *v1alpha1.Terraform) ([]corev1.Event, error) {
	var list corev1.EventList
	if err := s.c.List(ctx, &list, client.InNamespace(obj.Namespace), client.MatchingFields{"involvedObject.uid": string(obj.UID)}); err != nil {
		return nil, err
	}
	events := list.Items
	slices.SortStableFunc(events, func(x, y corev1.Event) int { return eventTime(x).Compare(eventTime(y)) })
	if len(events) > maxEvents {
		events = events[len(events)-maxEvents:]
	}
	return events, nil
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
	case obj.IsPreview():
		return "none: a preview (spec.preview; plans are never applied)"
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

// planState says where the last plan stands: a state for scripts and the
// words for people.
func planState(obj *v1alpha1.Terraform, approve string) (string, string) {
	p := obj.Status.Plan
	switch {
	case p.Pending != "" && obj.IsPreview():
		return "preview", "a preview: never applied; a merge applies through " + cmp.Or(obj.PreviewTargetKey(), "its target") + ", which plans again"
	case p.Pending != "" && obj.Spec.PlanOnly && obj.DeletionTimestamp.IsZero():
		return "plan-only", "not applied (spec.planOnly)"
	case obj.ApprovesPlan(p.Pending):
		return "approved", "approved, waiting to be applied"
	case p.Pending != "" && approval.Of(obj) == approval.AutoApproved:
		return "approved", "approved by approvePlan auto, waiting to be applied"
	case p.Pending != "" && heldAsDestructive(obj):
		return "pending-approval", "waits for approval: it destroys or replaces resources, which approvePlan auto leaves to a person (" + approve + ", or spec.autoApproveDestructive: true)"
	case p.Pending != "":
		return "pending-approval", "waits for approval (" + approve + ")"
	case p.ID != "" && p.ID == obj.Status.LastAppliedPlan:
		return "applied", "applied"
	case p.Add+p.Change+p.Destroy == 0:
		return "no-changes", "no changes"
	}
	return "not-applied", "not applied"
}

// heldAsDestructive reports a pending plan that approvePlan auto leaves to a
// person because it destroys or replaces resources, as the controller
// decides it (package approval).
func heldAsDestructive(obj *v1alpha1.Terraform) bool {
	pending := obj.PendingPlan()
	return pending != "" && approval.HeldAsDestructive(obj, pending)
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
