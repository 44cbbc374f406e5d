package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/approval"
	"github.com/landform-dev/landform/internal/planstore"
	"github.com/landform-dev/landform/internal/planview"
)

func (a *app) planCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Show plans",
	}
	var asJSON bool
	show := &cobra.Command{
		Use:   "show NAME",
		Short: "Show the pending plan as terraform prints it (or the last plan when none is pending)",
		Long: "Show the pending plan of a Terraform object as terraform prints it, from the plan\n" +
			"Landform stored: sensitive values are redacted as terraform redacts them.\n" +
			"When no plan is pending, the last stored plan is shown and said to be so.\n\n" +
			"--json prints terraform's JSON plan (`show -json`) instead, with every value\n" +
			"terraform marks sensitive, and the variables that are sensitive or come from\n" +
			"a Secret, replaced by \"(sensitive value)\".",
		Example:           a.examples("plan show", "database", "database --json | jq '.resource_changes[].address'"),
		Args:              a.oneName("plan show NAME"),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runPlanShow(cmd.Context(), args[0], asJSON)
		},
	}
	show.Flags().BoolVar(&asJSON, "json", false, "print the JSON plan, sensitive values redacted")
	cmd.AddCommand(show)
	return cmd
}

func (a *app) runPlanShow(ctx context.Context, name string, asJSON bool) error {
	s, obj, err := a.object(ctx, name)
	if err != nil {
		return err
	}
	p, err := s.storedPlan(ctx, obj)
	if err != nil {
		return err
	}
	if p == nil {
		return fmt.Errorf("Terraform %s/%s has no stored plan yet (%s shows what it waits for)", obj.Namespace, obj.Name, a.cmdName("status "+obj.Name))
	}
	pending := obj.PendingPlan()
	if pending != "" && p.ID != pending {
		return fmt.Errorf("plan %s is pending but the stored plan is %s: a new plan is being saved; try again in a moment", pending, p.ID)
	}

	var note string
	if pending == "" {
		state := "not applied"
		if p.Applied {
			state = "applied"
		}
		note = fmt.Sprintf("No plan is pending for %s/%s; the last plan, %s, was %s.", obj.Namespace, obj.Name, p.ID, state)
	}
	if asJSON {
		if note != "" {
			fmt.Fprintln(a.Streams.ErrOut, note)
		}
		doc, err := planview.Redact(p.JSONPlan, planview.SecretVariables(&obj.Spec))
		if err != nil {
			return fmt.Errorf("plan %s: %w", p.ID, err)
		}
		enc := json.NewEncoder(a.Streams.Out)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	}

	switch {
	case note != "":
		fmt.Fprintln(a.Streams.Out, note)
	case heldAsDestructive(obj):
		fmt.Fprintf(a.Streams.Out, "Plan %s of %s/%s (revision %s) waits for approval although approvePlan is auto: it %s, which approvePlan auto leaves to a person (%s, or spec.autoApproveDestructive: true).\n",
			p.ID, obj.Namespace, obj.Name, orDash(p.Revision), destructiveChanges(obj.Status.Plan), a.cmdName("approve "+obj.Name))
	default:
		fmt.Fprintf(a.Streams.Out, "Plan %s of %s/%s (revision %s) %s.\n", p.ID, obj.Namespace, obj.Name, orDash(p.Revision), pendingStanding(obj))
	}
	printImports(a.Streams.Out, obj, p)
	text, err := planview.RedactText(p.HumanPlan, p.JSONPlan, planview.SecretVariables(&obj.Spec))
	if err != nil {
		return fmt.Errorf("the stored plan %s cannot be checked for sensitive values, so its text is not shown: %w", p.ID, err)
	}
	if !bytes.HasPrefix(text, []byte("\n")) {
		// The plan's own text starts with its refresh lines.
		text = append([]byte("\n"), text...)
	}
	if !bytes.HasSuffix(text, []byte("\n")) {
		text = append(text, '\n')
	}
	_, err = a.Streams.Out.Write(text)
	return err
}

// printImports names the resources a plan imports (spec.imports), which
// terraform's own text mentions only among the changes; the counts are the
// status's when it describes this plan. Nothing for a plan that imports
// none, or an unreadable JSON plan.
func printImports(w io.Writer, obj *v1alpha1.Terraform, p *planstore.Plan) {
	d, err := planview.Read(p.JSONPlan)
	if err != nil {
		return
	}
	imports := d.Imports()
	if len(imports) == 0 {
		return
	}
	summary := fmt.Sprintf("%d to import", len(imports))
	if st := obj.Status.Plan; st != nil && st.ID == p.ID {
		summary = counts(st) + ", " + summary
	}
	fmt.Fprintf(w, "Changes: %s.\n", summary)
	for _, addr := range imports {
		fmt.Fprintf(w, "  to import: %s\n", addr)
	}
}

// storedPlan loads obj's stored plan; nil when there is none (yet).
func (s *session) storedPlan(ctx context.Context, obj *v1alpha1.Terraform) (*planstore.Plan, error) {
	p, err := planstore.Store{Client: s.c}.Load(ctx, obj)
	if errors.Is(err, planstore.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, s.explain(err, "get", resSecrets, "Secret", obj.Namespace, "")
	}
	// Show only what the controller would apply: the plan it stored, as
	// status.plan.digest names it.
	if st := obj.Status.Plan; st != nil && st.ID == p.ID && st.Digest != "" && st.Digest != p.Digest {
		return nil, fmt.Errorf("the stored plan %s of %s/%s was changed after it was made (its bytes are %s, the controller stored %s): the controller will not apply it and will plan again", p.ID, obj.Namespace, obj.Name, p.Digest, st.Digest)
	}
	return p, nil
}

// planDetailsFor reads the stored plan's details when the stored plan is
// plan id; nil when it is unreadable, missing or another one.
func (s *session) planDetailsFor(ctx context.Context, obj *v1alpha1.Terraform, id string) *planview.Details {
	p, err := s.storedPlan(ctx, obj)
	if err != nil || p == nil || (id != "" && p.ID != id) {
		return nil
	}
	d, err := planview.Read(p.JSONPlan)
	if err != nil {
		return nil
	}
	return d
}

// pendingStanding says where a pending plan stands, as the controller
// decides (package approval).
func pendingStanding(obj *v1alpha1.Terraform) string {
	switch approval.Of(obj) {
	case approval.Approved:
		return "is approved, waiting to be applied"
	case approval.AutoApproved:
		return "is approved by approvePlan auto, waiting to be applied"
	case approval.NotAppliedPlanOnly:
		return "is never applied (spec.planOnly)"
	case approval.NotAppliedPreview:
		return "is a preview's, never applied"
	}
	return "waits for approval"
}
