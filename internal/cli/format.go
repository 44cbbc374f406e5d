package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/spf13/cobra"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// progressingWithRetry is the controller's Reconciling reason while a
// failure is retried (controllers/terraform_conditions.go).
const progressingWithRetry = "ProgressingWithRetry"

// statusWidth bounds the STATUS column of tables.
const statusWidth = 60

// age formats the time since t the way kubectl does; "-" when unset.
func (a *app) age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(a.Now().Sub(t))
}

// when formats t as a UTC time and its age.
func (a *app) when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339) + " (" + a.age(t) + " ago)"
}

// shortDuration is d as a flag takes it, without zero units: "2h", not
// "2h0m0s"; "1h30m".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func metaTime(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

// counts is a plan's short summary, "+1 ~2 -0", like the controller's.
func counts(p *v1alpha1.PlanStatus) string {
	return fmt.Sprintf("+%d ~%d -%d", p.Add, p.Change, p.Destroy)
}

// shortRevision cuts the hash of a Flux revision ("main@sha1:0a1b2c…") to
// ten characters, as plan ids do.
func shortRevision(rev string) string {
	if rev == "" {
		return "-"
	}
	i := strings.LastIndex(rev, ":")
	if i >= 0 && len(rev)-i-1 > 10 {
		return rev[:i+1+10]
	}
	return rev
}

// truncate cuts s to n runes, marking the cut.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// readyStatus is the Ready condition's status, "Unknown" when absent.
func readyStatus(obj *v1alpha1.Terraform) string {
	if c := apimeta.FindStatusCondition(obj.Status.Conditions, meta.ReadyCondition); c != nil {
		return string(c.Status)
	}
	return string(metav1.ConditionUnknown)
}

// statusText says in a few words where the object is.
func statusText(obj *v1alpha1.Terraform) string {
	ready := apimeta.FindStatusCondition(obj.Status.Conditions, meta.ReadyCondition)
	reconciling := apimeta.FindStatusCondition(obj.Status.Conditions, meta.ReconcilingCondition)
	switch {
	case !obj.DeletionTimestamp.IsZero():
		return "deleting"
	case reconciling != nil && reconciling.Status == metav1.ConditionTrue && reconciling.Reason != progressingWithRetry:
		return reconciling.Message
	case ready != nil:
		return ready.Message
	}
	return "waiting for the controller"
}

// planColumn is the pending plan's id, else the last plan's counts; a
// preview's says so.
func planColumn(obj *v1alpha1.Terraform) string {
	p := obj.Status.Plan
	col := "-"
	switch {
	case p == nil:
	case p.Pending != "":
		col = p.Pending
	default:
		col = counts(p)
	}
	if obj.IsPreview() {
		return "preview " + col
	}
	return col
}

// newTable is kubectl's column layout; widths are remembered across
// flushes so that watched rows line up with the header.
func newTable(w io.Writer) *tableWriter {
	return &tableWriter{w: printers.GetNewTabWriter(w)}
}

type tableWriter struct {
	w interface {
		io.Writer
		Flush() error
	}
}

func (t *tableWriter) row(cells ...string) {
	fmt.Fprintln(t.w, strings.Join(cells, "\t"))
}

func (t *tableWriter) flush() error { return t.w.Flush() }

// printObject prints a Kubernetes object as JSON or YAML, without managed
// fields, as kubectl does.
func printObject(w io.Writer, format string, obj k8sruntime.Object) error {
	var p printers.ResourcePrinter
	switch format {
	case "json":
		p = &printers.JSONPrinter{}
	case "yaml":
		p = &printers.YAMLPrinter{}
	default:
		return badOutput(format)
	}
	return (&printers.OmitManagedFieldsPrinter{Delegate: p}).PrintObj(obj, w)
}

// printData prints plain data as JSON or YAML. JSON keeps <, > and & as
// they are (">=1.29.0", not "\u003e=1.29.0"): it is read, not embedded in
// HTML.
func printData(w io.Writer, format string, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "    ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	data := buf.Bytes()
	var err error
	switch format {
	case "json":
		_, err = w.Write(data)
	case "yaml":
		if data, err = yaml.JSONToYAML(data); err == nil {
			_, err = w.Write(data)
		}
	default:
		err = badOutput(format)
	}
	return err
}

// printResult prints v as printData does and returns err, the command's
// outcome, which the result describes: a failed command prints its result
// too. A printing error is returned only when err is nil.
func printResult(w io.Writer, format string, v any, err error) error {
	if perr := printData(w, format, v); perr != nil && err == nil {
		return perr
	}
	return err
}

func badOutput(format string) error {
	return fmt.Errorf("unknown output format %q: use -o json or -o yaml", format)
}

// withKind sets obj's apiVersion and kind, which typed clients leave empty
// and printers need.
func withKind(obj *v1alpha1.Terraform) *v1alpha1.Terraform {
	obj.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(v1alpha1.TerraformKind))
	return obj
}

// outputFlag registers -o/--output (json or yaml) with its completion.
func (a *app) outputFlag(cmd *cobra.Command, output *string, usage string) {
	cmd.Flags().StringVarP(output, "output", "o", "", usage)
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
}

// progressOut is where a command with -o format writes what it does as it
// goes: stdout without -o, else stderr, which leaves stdout to the result.
func (a *app) progressOut(format string) io.Writer {
	if format != "" {
		return a.Streams.ErrOut
	}
	return a.Streams.Out
}

// checkOutput refuses an -o value other than json and yaml (or none).
func checkOutput(format string) error {
	if format != "" && format != "json" && format != "yaml" {
		return badOutput(format)
	}
	return nil
}
