package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"unicode"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/landform-dev/landform/internal/outputs"
)

// hiddenValue stands for a sensitive output's value.
const hiddenValue = "(sensitive)"

func (a *app) outputsCommand() *cobra.Command {
	var showSensitive bool
	var output string
	cmd := &cobra.Command{
		Use:   "outputs NAME",
		Short: "Show the module's outputs and their values from the outputs Secret",
		Long: "Show the module's outputs (status.availableOutputs) with their values, read from\n" +
			"the Secret spec.writeOutputsToSecret names, with your own permissions.\n\n" +
			"Sensitive outputs show as " + hiddenValue + " unless --show-sensitive is given. Which\n" +
			"outputs are sensitive comes from the last stored plan; an output that plan does\n" +
			"not describe (or when it cannot be read) is treated as sensitive.",
		Example:           a.examples("outputs", "database", "database --show-sensitive -o json"),
		Args:              a.oneName("outputs NAME"),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			return a.runOutputs(cmd.Context(), args[0], showSensitive, output)
		},
	}
	cmd.Flags().BoolVar(&showSensitive, "show-sensitive", false, "print sensitive values too")
	a.outputFlag(cmd, &output, "print as json or yaml instead of a table")
	return cmd
}

// outputRow is one output as printed.
type outputRow = outputs.Row

func (a *app) runOutputs(ctx context.Context, name string, showSensitive bool, format string) error {
	s, obj, err := a.object(ctx, name)
	if err != nil {
		return err
	}
	names := obj.Status.AvailableOutputs
	if len(names) == 0 {
		fmt.Fprintf(a.Streams.ErrOut, "Terraform %s/%s has no outputs yet (none applied, or the module declares none).\n", obj.Namespace, obj.Name)
		if format != "" {
			return printData(a.Streams.Out, format, []outputRow{})
		}
		return nil
	}

	sensitive := func(string) bool { return true }
	if d := s.planDetailsFor(ctx, obj, ""); d != nil {
		sensitive = func(n string) bool {
			known, ok := d.Sensitive[n]
			return !ok || known
		}
	}

	view := outputs.View{Spec: obj.Spec.WriteOutputsToSecret, Names: names, Sensitive: sensitive, Hidden: hiddenValue, Show: showSensitive}
	if spec := view.Spec; spec != nil {
		var secret corev1.Secret
		err := s.c.Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: spec.Name}, &secret)
		switch {
		case apierrors.IsNotFound(err):
			view.Absent = true
		case err != nil:
			return s.explain(err, "get", resSecrets, "Secret", obj.Namespace, spec.Name)
		}
		view.Data = secret.Data
	}
	rows := view.Rows()
	hidden := slices.ContainsFunc(rows, func(r outputRow) bool { return r.Note == hiddenValue })

	if format != "" {
		return printData(a.Streams.Out, format, rows)
	}
	t := newTable(a.Streams.Out)
	t.row("NAME", "SECRET KEY", "VALUE")
	for _, r := range rows {
		v := r.Note
		if v == "" {
			v = printable(r.Value)
		}
		t.row(r.Name, orDash(r.Key), v)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if hidden {
		fmt.Fprintln(a.Streams.ErrOut, "Sensitive values are hidden: --show-sensitive prints them.")
	}
	return nil
}

// printable keeps a table cell on one line: a value with line breaks or
// control characters is printed quoted.
func printable(v string) string {
	for _, r := range v {
		if unicode.IsControl(r) {
			return strconv.Quote(v)
		}
	}
	return v
}
