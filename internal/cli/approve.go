package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

func (a *app) approveCommand() *cobra.Command {
	var planID string
	var yes bool
	cmd := &cobra.Command{
		Use:   "approve NAME",
		Short: "Approve the pending plan (exactly that plan) after showing what it changes",
		Long: "Approve the pending plan of a Terraform object: the plan's summary is shown,\n" +
			"then the annotation " + v1alpha1.ApproveAnnotation + " is set to the plan's id and nothing\n" +
			"else is changed. An approval names one plan: if the module is planned again with\n" +
			"other changes, the new plan waits for its own approval.\n\n" +
			"A plan that destroys or replaces anything is approved only after you answer y\n" +
			"(or with --yes). --plan makes sure the plan you reviewed is the one approved.",
		Example:           "  " + a.cmdName("approve") + " database\n  " + a.cmdName("approve") + " database --plan plan-4f2a9c0d1e-9b8e7d6c5a --yes",
		Args:              a.oneName("approve NAME"),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runApprove(cmd.Context(), args[0], planID, yes)
		},
	}
	cmd.Flags().StringVar(&planID, "plan", "", "approve only if this plan id is the pending plan")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask before approving a plan that destroys or replaces resources")
	return cmd
}

func (a *app) runApprove(ctx context.Context, name, planID string, yes bool) error {
	s, obj, err := a.object(ctx, name)
	if err != nil {
		return err
	}
	pending := obj.PendingPlan()
	// Deletion behind spec.destroyApproval manual waits for its destroy
	// plan's own approval, whatever approvePlan and planOnly say.
	gatedDestroy := !obj.DeletionTimestamp.IsZero() && obj.IsDestroyGated() && obj.Status.Plan != nil && obj.Status.Plan.IsDestroy
	switch {
	case obj.Spec.PlanOnly && !gatedDestroy:
		return fmt.Errorf("Terraform %s/%s has spec.planOnly set: its plans are never applied; set planOnly to false to apply them", obj.Namespace, obj.Name)
	case pending == "":
		msg := fmt.Sprintf("Terraform %s/%s has no pending plan", obj.Namespace, obj.Name)
		if obj.Status.LastAppliedPlan != "" {
			msg += fmt.Sprintf(" (the last applied plan is %s)", obj.Status.LastAppliedPlan)
		}
		return errors.New(msg + "; nothing to approve")
	case planID != "" && planID != pending:
		return fmt.Errorf("plan %s is not the pending plan of %s/%s, %s is: review it with %s", planID, obj.Namespace, obj.Name, pending, a.cmdName("plan show "+obj.Name))
	case obj.GetAnnotations()[v1alpha1.ApproveAnnotation] == pending || obj.Spec.ApprovePlan == pending || (obj.IsAutoApprove() && !gatedDestroy && !heldAsDestructive(obj)):
		fmt.Fprintf(a.Streams.Out, "Plan %s of %s/%s is already approved.\n", pending, obj.Namespace, obj.Name)
		return nil
	}

	details := s.planDetailsFor(ctx, obj, pending)
	a.printPlanSummary(a.Streams.Out, obj, details)
	if destroys := destructiveCount(obj.Status.Plan, details); destroys > 0 && !yes {
		fmt.Fprintf(a.Streams.Out, "This plan destroys or replaces %d resource(s). Approve plan %s? [y/N]: ", destroys, pending)
		answer, err := bufio.NewReader(a.Streams.In).ReadString('\n')
		fmt.Fprintln(a.Streams.Out)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("reading the answer: %w", err)
		}
		switch strings.ToLower(strings.TrimSpace(answer)) {
		case "y", "yes":
		case "":
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("plan %s destroys or replaces resources and no answer came: answer y on a terminal, or pass --yes; nothing was approved", pending)
			}
			fallthrough
		default:
			return fmt.Errorf("plan %s was not approved", pending)
		}
	}
	if err := s.annotate(ctx, obj, v1alpha1.ApproveAnnotation, pending); err != nil {
		return err
	}
	fmt.Fprintf(a.Streams.Out, "Approved plan %s of %s/%s: the controller applies it next (follow with: %s).\n",
		pending, obj.Namespace, obj.Name, a.cmdName("logs -f "+obj.Name))
	return nil
}

// printPlanSummary prints a plan's id, origin, resource changes and counts.
func (a *app) printPlanSummary(w io.Writer, obj *v1alpha1.Terraform, details *planDetails) {
	p := obj.Status.Plan
	fmt.Fprintf(w, "Plan %s of %s/%s (revision %s, planned %s ago):\n",
		orDash(p.Pending), obj.Namespace, obj.Name, shortRevision(p.Revision), a.age(metaTime(p.PlannedAt)))
	switch {
	case details != nil:
		for _, c := range details.Changes {
			fmt.Fprintf(w, "  %3s %s%s\n", c.symbol(), c.Address, c.note())
		}
	case len(p.Resources) > 0:
		fmt.Fprintln(w, "  (the stored plan could not be read: addresses only)")
		for _, r := range p.Resources {
			fmt.Fprintf(w, "      %s\n", r)
		}
	}
	fmt.Fprintf(w, "  %d to add, %d to change, %d to destroy.", p.Add, p.Change, p.Destroy)
	switch {
	case p.IsDestroy:
		fmt.Fprint(w, " It destroys everything the module manages (spec.destroy).")
	case p.IsDrift:
		fmt.Fprint(w, " It repairs drift: the resources were changed outside Terraform.")
	}
	fmt.Fprintln(w)
}

// destructiveCount is how many resources the plan deletes or replaces.
func destructiveCount(p *v1alpha1.PlanStatus, details *planDetails) int {
	if details == nil {
		return int(p.Destroy)
	}
	n := 0
	for _, c := range details.Changes {
		if c.destructive() {
			n++
		}
	}
	return n
}
