package cli

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/approval"
	"github.com/landform-dev/landform/internal/planview"
)

type approveOptions struct {
	planID string
	yes    bool
	// file is the manifest to write the approval into (-f).
	file   string
	output string
}

func (a *app) approveCommand() *cobra.Command {
	var o approveOptions
	cmd := &cobra.Command{
		Use:   "approve NAME",
		Short: "Approve the pending plan (exactly that plan) after showing what it changes",
		Long: "Approve the pending plan of a Terraform object: the plan's summary is shown,\n" +
			"then the annotation " + v1alpha1.ApproveAnnotation + " is set to the plan's id and nothing\n" +
			"else is changed. An approval names one plan: if the module is planned again with\n" +
			"other changes, the new plan waits for its own approval.\n\n" +
			"A plan that destroys or replaces anything is approved only after you answer y\n" +
			"(or with --yes). --plan makes sure the plan you reviewed is the one approved.\n\n" +
			"With -f, the approval goes through Git instead: spec.approvePlan of the object's\n" +
			"manifest in FILE is set to the plan's id, the rest of the file kept as it is;\n" +
			"commit and push it, and the plan is applied once Flux applies the manifest.",
		Example:           a.examples("approve", "database", "database --plan plan-4f2a9c0d1e-9b8e7d6c5a --yes", "database -f infra/database.yaml && git commit -am 'approve database'"),
		Args:              a.oneName("approve NAME"),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(o.output); err != nil {
				return err
			}
			return a.runApprove(cmd.Context(), args[0], o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.planID, "plan", "", "approve only if this plan id is the pending plan")
	f.BoolVarP(&o.yes, "yes", "y", false, "do not ask before approving a plan that destroys or replaces resources")
	f.StringVarP(&o.file, "filename", "f", "", "write the approval as spec.approvePlan into the object's manifest in this file, for Git")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml")
	a.outputFlag(cmd, &o.output, "print the result as json or yaml (the plan's summary goes to stderr)")
	return cmd
}

// approveResult is what `approve -o json|yaml` prints.
type approveResult struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Plan      string `json:"plan"`
	// AlreadyApproved: nothing was written, the plan was approved before.
	AlreadyApproved bool `json:"alreadyApproved"`
	// File is the manifest the approval was written into (-f).
	File    string `json:"file,omitempty"`
	Add     int32  `json:"add"`
	Change  int32  `json:"change"`
	Destroy int32  `json:"destroy"`
}

func (a *app) runApprove(ctx context.Context, name string, o approveOptions) error {
	s, obj, err := a.object(ctx, name)
	if err != nil {
		return err
	}
	w := a.progressOut(o.output)
	pending := obj.PendingPlan()
	standing := approval.Of(obj)
	switch {
	case standing == approval.NotAppliedPreview:
		return fmt.Errorf("Terraform %s/%s is a preview (spec.preview): its plans are never applied; a merge applies through %s, which plans again", obj.Namespace, obj.Name, cmp.Or(obj.PreviewTargetKey(), "its target"))
	case standing == approval.NotAppliedPlanOnly:
		return fmt.Errorf("Terraform %s/%s has spec.planOnly set: its plans are never applied; set planOnly to false to apply them", obj.Namespace, obj.Name)
	case standing == approval.NoPendingPlan:
		msg := fmt.Sprintf("Terraform %s/%s has no pending plan", obj.Namespace, obj.Name)
		if obj.Status.LastAppliedPlan != "" {
			msg += fmt.Sprintf(" (the last applied plan is %s)", obj.Status.LastAppliedPlan)
		}
		return errors.New(msg + "; nothing to approve")
	case o.planID != "" && o.planID != pending:
		return fmt.Errorf("plan %s is not the pending plan of %s/%s, %s is: review it with %s", o.planID, obj.Namespace, obj.Name, pending, a.cmdName("plan show "+obj.Name))
	}
	p := obj.Status.Plan
	res := approveResult{Namespace: obj.Namespace, Name: obj.Name, Plan: pending, File: o.file, Add: p.Add, Change: p.Change, Destroy: p.Destroy}
	done := func(format string, args ...any) error {
		fmt.Fprintf(w, format, args...)
		if o.output != "" {
			return printData(a.Streams.Out, o.output, res)
		}
		return nil
	}
	// With -f the file says whether the plan is approved; the cluster may
	// not have the manifest yet.
	if o.file == "" && standing == approval.Approved || standing == approval.AutoApproved {
		res.AlreadyApproved = true
		return done("Plan %s of %s/%s is already approved.\n", pending, obj.Namespace, obj.Name)
	}
	var edited []byte
	if o.file != "" {
		// The file is checked before anyone is asked anything.
		var already bool
		if edited, already, err = a.approvalInFile(obj, o.file, pending); err != nil {
			return err
		}
		if already {
			res.AlreadyApproved = true
			return done("%s already approves plan %s of %s/%s (spec.approvePlan): commit and push it if you have not.\n", o.file, pending, obj.Namespace, obj.Name)
		}
	}

	details := s.planDetailsFor(ctx, obj, pending)
	a.printPlanSummary(w, obj, details)
	if destroys := destructiveCount(p, details); destroys > 0 && !o.yes {
		fmt.Fprintf(w, "This plan destroys or replaces %d resource(s). Approve plan %s? [y/N]: ", destroys, pending)
		answer, err := bufio.NewReader(a.Streams.In).ReadString('\n')
		fmt.Fprintln(w)
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
	if o.file != "" {
		if err := writeFileKeepingMode(o.file, edited); err != nil {
			return fmt.Errorf("writing %s: %w", o.file, err)
		}
		return done("Wrote spec.approvePlan: %s into %s (Terraform %s/%s): commit and push it; the controller applies the plan once Flux has applied the manifest.\n",
			pending, o.file, obj.Namespace, obj.Name)
	}
	if err := s.annotate(ctx, obj, v1alpha1.ApproveAnnotation, pending); err != nil {
		return err
	}
	return done("Approved plan %s of %s/%s: the controller applies it next (follow with: %s).\n",
		pending, obj.Namespace, obj.Name, a.cmdName("logs -f "+obj.Name))
}

// approvalInFile returns file with spec.approvePlan of obj's manifest set
// to id, and whether it already was.
func (a *app) approvalInFile(obj *v1alpha1.Terraform, file, id string) ([]byte, bool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, false, fmt.Errorf("reading the manifest: %w", err)
	}
	edited, already, err := setApprovePlan(data, obj.Namespace, obj.Name, id)
	switch {
	case errors.Is(err, errApprovesAuto):
		return nil, false, fmt.Errorf("%s sets spec.approvePlan: auto for Terraform %s/%s, which a plan id there would turn off: approve this plan with %s instead, or set spec.autoApproveDestructive: true",
			file, obj.Namespace, obj.Name, a.cmdName("approve "+obj.Name))
	case err != nil:
		return nil, false, fmt.Errorf("cannot approve plan %s in %s: %w", id, file, err)
	}
	return edited, already, nil
}

// writeFileKeepingMode replaces file with data through a temporary file
// in its directory, so that an interrupted write leaves the old file.
func writeFileKeepingMode(file string, data []byte) error {
	info, err := os.Stat(file)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(info.Mode().Perm()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}

// printPlanSummary prints a plan's id, origin, resource changes and counts.
func (a *app) printPlanSummary(w io.Writer, obj *v1alpha1.Terraform, details *planview.Details) {
	p := obj.Status.Plan
	fmt.Fprintf(w, "Plan %s of %s/%s (revision %s, planned %s ago):\n",
		orDash(p.Pending), obj.Namespace, obj.Name, shortRevision(p.Revision), a.age(metaTime(p.PlannedAt)))
	switch {
	case details != nil:
		for _, c := range details.Changes {
			fmt.Fprintf(w, "  %3s %s%s\n", c.Symbol(), c.Address, c.Note())
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
func destructiveCount(p *v1alpha1.PlanStatus, details *planview.Details) int {
	if details == nil {
		return int(p.Destroy)
	}
	n := 0
	for _, c := range details.Changes {
		if c.Destructive() {
			n++
		}
	}
	return n
}
