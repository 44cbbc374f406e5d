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

// logsOptions are the flags of logs.
type logsOptions struct {
	follow     bool
	controller bool
	phase      runlog.Phase
	// since keeps what was logged in the last since (0: everything), as
	// kubectl logs --since does.
	since time.Duration
	// tail keeps the last tail lines (-1: all) of each phase, or of each
	// controller Pod, of what is printed, as kubectl logs --tail does.
	tail int
	// output prints the runs' logs once as json or yaml.
	output string
}

// logResult is one phase's last run as -o prints it.
type logResult struct {
	Phase      string    `json:"phase"`
	State      string    `json:"state"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	Text       string    `json:"text"`
}

func (a *app) logsCommand() *cobra.Command {
	o := logsOptions{tail: -1}
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
			"as the controller wrote them; -f follows them.\n\n" +
			"--since and --tail mean what they mean to kubectl logs, counted in what is\n" +
			"printed: the last N lines of each phase, or about the object of each\n" +
			"controller Pod. A run's lines carry no time of their own: --since keeps,\n" +
			"whole, the runs that ended within the duration or still run.",
		Example:           a.examples("logs", "database", "database -f --phase apply --tail 20", "database --controller --since 1h | jq -r .msg"),
		Args:              a.oneName("logs NAME"),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(o.output); err != nil {
				return err
			}
			switch {
			case o.since < 0:
				return fmt.Errorf("--since %s: use a positive duration, such as 30m or 2h", shortDuration(o.since))
			case o.tail < -1:
				return fmt.Errorf("--tail %d: use a number of lines, or -1 for all", o.tail)
			case o.controller && phase != "":
				return errors.New("--phase selects a run's output, --controller the controller's log: use one of them")
			case o.output != "" && (o.follow || o.controller):
				return errors.New("-o prints the runs' logs once: drop -f and --controller, or -o")
			case o.controller:
				return a.runControllerLogs(cmd.Context(), args[0], o)
			case phase != "" && !slices.Contains(phases, phase):
				return fmt.Errorf("unknown phase %q: use one of %s", phase, strings.Join(phases, ", "))
			}
			o.phase = runlog.Phase(phase)
			return a.runLogs(cmd.Context(), args[0], o)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.follow, "follow", "f", false, "follow the running phase and later runs until interrupted")
	f.StringVar(&phase, "phase", "", "only this phase: "+strings.Join(phases, ", "))
	f.BoolVar(&o.controller, "controller", false, "print the controller's log lines about the object instead")
	f.DurationVar(&o.since, "since", 0, "only what was logged in the last DURATION, such as 30m or 2h (a run whole, if it ended then or still runs)")
	f.IntVar(&o.tail, "tail", -1, "only the last N lines of each phase, or of each controller Pod about the object (-1: all)")
	a.outputFlag(cmd, &o.output, "print each phase's last run (phase, state, times, text) as json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("phase", cobra.FixedCompletions(phases, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (a *app) runLogs(ctx context.Context, name string, o logsOptions) error {
	s, obj, err := a.object(ctx, name)
	if err != nil {
		return err
	}
	var cut time.Time
	if o.since > 0 {
		cut = a.Now().Add(-o.since)
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
		if only := o.phase; only != "" {
			logs = map[runlog.Phase]runlog.PhaseLog{only: logs[only]}
			if logs[only].State == "" {
				delete(logs, only)
			}
		}
		tail := -1
		if first {
			tail = o.tail
			dropOldRuns(logs, shown, cut)
			if len(logs) == 0 {
				a.noLogsYet(obj, o, len(shown) > 0)
			}
		}
		first = false
		if o.output != "" {
			out := []logResult{}
			for _, l := range byStart(logs) {
				out = append(out, logResult{Phase: string(l.Phase), State: string(l.State), StartedAt: l.StartedAt.UTC(), FinishedAt: l.FinishedAt.UTC(), Text: lastLines(l.Text, o.tail)})
			}
			return printData(a.Streams.Out, o.output, out)
		}
		for _, l := range byStart(logs) {
			a.printLogUpdate(a.Streams.Out, obj, shown, l, tail)
			shown[l.Phase] = l
		}
		if !o.follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(a.PollInterval):
		}
	}
}

// dropOldRuns moves the runs that ended before cut from logs to shown:
// they are not printed, but a later run of their phase is.
func dropOldRuns(logs, shown map[runlog.Phase]runlog.PhaseLog, cut time.Time) {
	for p, l := range logs {
		if l.State != runlog.StateRunning && l.FinishedAt.Before(cut) {
			shown[p] = l
			delete(logs, p)
		}
	}
}

// noLogsYet says on stderr that there is no run log to print; old says
// that there are, but --since leaves them out.
func (a *app) noLogsYet(obj *v1alpha1.Terraform, o logsOptions, old bool) {
	what := "run"
	if o.phase != "" {
		what = string(o.phase) + " run"
	}
	msg := fmt.Sprintf("No %s log kept for %s/%s yet", what, obj.Namespace, obj.Name)
	if old {
		msg = fmt.Sprintf("No %s log kept for %s/%s from the last %s", what, obj.Namespace, obj.Name, shortDuration(o.since))
	}
	if o.follow {
		msg += "; waiting for one"
	}
	fmt.Fprintln(a.Streams.ErrOut, msg+".")
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
// log of a run not shown yet (its last tail lines, unless tail is -1),
// else the new text and the outcome.
func (a *app) printLogUpdate(w io.Writer, obj *v1alpha1.Terraform, shown map[runlog.Phase]runlog.PhaseLog, l runlog.PhaseLog, tail int) {
	prev, seen := shown[l.Phase]
	// A new run: started later, or running again (start times are in seconds).
	if !seen || !prev.StartedAt.Equal(l.StartedAt) || prev.State != runlog.StateRunning && l.State == runlog.StateRunning {
		fmt.Fprintf(w, "==> %s of %s/%s: %s\n", l.Phase, obj.Namespace, obj.Name, logState(l))
		io.WriteString(w, lastLines(l.Text, tail))
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

// lastLines is the last n lines of s (all of s when n is -1).
func lastLines(s string, n int) string {
	if n < 0 {
		return s
	}
	cut := len(s)
	if strings.HasSuffix(s, "\n") {
		cut-- // the newline that ends the last line
	}
	for range n {
		i := strings.LastIndexByte(s[:cut], '\n')
		if i < 0 {
			return s
		}
		cut = i
	}
	if n == 0 {
		return ""
	}
	return s[cut+1:]
}
