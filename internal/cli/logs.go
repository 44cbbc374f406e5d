package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/runlog"
)

func (a *app) logsCommand() *cobra.Command {
	var follow, controller bool
	var phase string
	phases := make([]string, len(runlog.Phases))
	for i, p := range runlog.Phases {
		phases[i] = string(p)
	}
	cmd := &cobra.Command{
		Use:   "logs NAME",
		Short: "Print terraform's output of the last run of each phase (plan, apply, destroy), or the controller's log lines",
		Long: "Print terraform's output of the last run of each phase (plan, apply, destroy),\n" +
			"oldest first, as the controller keeps it: secret values redacted, the last\n" +
			"256 KiB of each phase. A running phase is written every 2 seconds; -f follows\n" +
			"it, and every later run, until interrupted.\n\n" +
			"--controller prints instead the lines of the controller's own log about the\n" +
			"object (from the Pods labelled " + controllerPodSelector + "),\n" +
			"as the controller wrote them; -f follows them.",
		Example: "  " + a.cmdName("logs") + " database\n" +
			"  " + a.cmdName("logs") + " database -f --phase apply\n" +
			"  " + a.cmdName("logs") + " database --controller | jq -r .msg",
		Args:              a.oneName("logs NAME"),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			if controller {
				if phase != "" {
					return errors.New("--phase selects a run's output, --controller the controller's log: use one of them")
				}
				return a.runControllerLogs(cmd.Context(), args[0], follow)
			}
			if phase != "" && !slices.Contains(phases, phase) {
				return fmt.Errorf("unknown phase %q: use one of %s", phase, strings.Join(phases, ", "))
			}
			return a.runLogs(cmd.Context(), args[0], follow, runlog.Phase(phase))
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the running phase and later runs until interrupted")
	cmd.Flags().StringVar(&phase, "phase", "", "only this phase: "+strings.Join(phases, ", "))
	cmd.Flags().BoolVar(&controller, "controller", false, "print the controller's log lines about the object instead")
	_ = cmd.RegisterFlagCompletionFunc("phase", cobra.FixedCompletions(phases, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (a *app) runLogs(ctx context.Context, name string, follow bool, only runlog.Phase) error {
	s, obj, err := a.object(ctx, name)
	if err != nil {
		return err
	}
	shown := map[runlog.Phase]runlog.PhaseLog{}
	first := true
	for {
		logs, err := runlog.Read(ctx, s.c, obj.Namespace, obj.Name)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return s.explain(err, "get", resSecrets, "Secret", obj.Namespace, runlog.SecretName(obj.Name))
		}
		if only != "" {
			logs = map[runlog.Phase]runlog.PhaseLog{only: logs[only]}
			if logs[only].State == "" {
				delete(logs, only)
			}
		}
		if first && len(logs) == 0 {
			what := "run"
			if only != "" {
				what = string(only) + " run"
			}
			if follow {
				fmt.Fprintf(a.Streams.ErrOut, "No %s log kept for %s/%s yet; waiting for one.\n", what, obj.Namespace, obj.Name)
			} else {
				fmt.Fprintf(a.Streams.ErrOut, "No %s log kept for %s/%s yet.\n", what, obj.Namespace, obj.Name)
			}
		}
		first = false
		for _, l := range byStart(logs) {
			a.printLogUpdate(a.Streams.Out, obj, shown, l)
			shown[l.Phase] = l
		}
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(a.PollInterval):
		}
	}
}

// byStart orders phase logs oldest run first.
func byStart(logs map[runlog.Phase]runlog.PhaseLog) []runlog.PhaseLog {
	out := make([]runlog.PhaseLog, 0, len(logs))
	for _, p := range runlog.Phases {
		if l, ok := logs[p]; ok {
			out = append(out, l)
		}
	}
	slices.SortStableFunc(out, func(x, y runlog.PhaseLog) int { return x.StartedAt.Compare(y.StartedAt) })
	return out
}

// printLogUpdate prints what l adds to what was shown of its phase: the
// whole log of a run not shown yet, else the new text and the outcome.
func (a *app) printLogUpdate(w io.Writer, obj *v1alpha1.Terraform, shown map[runlog.Phase]runlog.PhaseLog, l runlog.PhaseLog) {
	prev, seen := shown[l.Phase]
	// A new run: started later, or running again (start times are in seconds).
	if !seen || !prev.StartedAt.Equal(l.StartedAt) || prev.State != runlog.StateRunning && l.State == runlog.StateRunning {
		fmt.Fprintf(w, "==> %s of %s/%s: %s\n", l.Phase, obj.Namespace, obj.Name, logState(l))
		io.WriteString(w, l.Text)
		return
	}
	io.WriteString(w, newText(prev.Text, l.Text))
	if prev.State == runlog.StateRunning && l.State != runlog.StateRunning {
		fmt.Fprintf(w, "==> %s of %s/%s: %s\n", l.Phase, obj.Namespace, obj.Name, logState(l))
	}
}

func logState(l runlog.PhaseLog) string {
	started := l.StartedAt.UTC().Format(time.RFC3339)
	if l.State == runlog.StateRunning {
		return "running since " + started
	}
	return fmt.Sprintf("%s (started %s, finished %s)", l.State, started, l.FinishedAt.UTC().Format(time.RFC3339))
}

// newText is what cur adds to old, two versions of one phase's log. The
// log keeps only its tail, so cur may have lost old's beginning: the new
// text then follows the last place where old's end appears in cur.
func newText(old, cur string) string {
	if strings.HasPrefix(cur, old) {
		return cur[len(old):]
	}
	anchor := old[len(old)-min(len(old), 1024):]
	if i := strings.LastIndex(cur, anchor); i >= 0 && anchor != "" {
		return cur[i+len(anchor):]
	}
	return "[some output was dropped]\n" + cur
}
