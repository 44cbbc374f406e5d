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
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

func (a *app) replanCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "replan NAME",
		Short: "Ask the controller to plan again now (drift check)",
		Long: "Ask the controller to plan again now, as `flux reconcile` does: the annotation\n" +
			meta.ReconcileRequestAnnotation + " is set to the current time.",
		Args:              a.oneName("replan NAME"),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, obj, err := a.requestReconcile(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(a.Streams.Out, "Requested a new plan of %s/%s.\n", obj.Namespace, obj.Name)
			if p := obj.PendingPlan(); p != "" {
				// An identical new plan keeps this id, and so its approval.
				fmt.Fprintf(a.Streams.ErrOut, "Plan %s is pending: the new plan replaces it (same changes, same id).\n", p)
			}
			return nil
		},
	}
}

type reconcileOptions struct {
	wait       bool
	timeout    time.Duration
	until      string
	withSource bool
	output     string
}

func (a *app) reconcileCommand() *cobra.Command {
	o := reconcileOptions{wait: true, until: untilReady}
	cmd := &cobra.Command{
		Use:   "reconcile NAME",
		Short: "Ask the controller to reconcile now and wait until Ready or failure (--until=planned: until the plan is made)",
		Long: "Ask the controller to reconcile now, as `flux reconcile` does (the annotation\n" +
			meta.ReconcileRequestAnnotation + " is set to the current time), and follow it\n" +
			"until the controller has handled the request, printing each step.\n\n" +
			"The object is judged as Flux's health checks judge it (kstatus). Steps the\n" +
			"controller gets past by itself are waited through: a run under way or queued,\n" +
			"a dependency, an input or the source not ready yet, a state lock held by a\n" +
			"run, and, with the default --until=ready, a plan waiting for approval (an\n" +
			"approval may be on its way from a person or from Git): the command then\n" +
			"waits until the plan is applied or --timeout runs out (exit 3). Any other\n" +
			"reason for not being Ready is a failure.\n\n" +
			"--until=planned stops once the plan is made: exit 2 when it waits for\n" +
			"approval, or has changes being applied or kept by planOnly; exit 0 when there\n" +
			"is nothing to apply. A CI job, where no one approves while it waits, runs\n" +
			"reconcile NAME --until=planned.\n\n" +
			"Exit codes: 0 Ready (nothing left to apply), 1 failed, 2 (--until=planned\n" +
			"only) the plan waits for approval or has changes, 3 timed out.",
		Example:           a.examples("reconcile", "database", "database --with-source", "database --until=planned -o json", "database --wait=false"),
		Args:              a.oneName("reconcile NAME"),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runReconcile(cmd.Context(), args[0], o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.wait, "wait", true, "wait until the controller has handled the request (--wait=false only requests it)")
	f.DurationVar(&o.timeout, "timeout", 0, "how long to wait (default: the object's spec.timeout plus 5m)")
	f.StringVar(&o.until, "until", untilReady, "wait until the object is ready (applied, or nothing to apply) or planned (the plan is made)")
	f.BoolVar(&o.withSource, "with-source", false, "reconcile the Flux source first and wait for its new artifact")
	a.outputFlag(cmd, &o.output, "print the result as json or yaml (progress goes to stderr)")
	_ = cmd.RegisterFlagCompletionFunc("until", cobra.FixedCompletions([]string{untilReady, untilPlanned}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (a *app) runReconcile(ctx context.Context, name string, o reconcileOptions) error {
	if o.until != untilReady && o.until != untilPlanned {
		return fmt.Errorf("unknown --until %q: use %s or %s", o.until, untilReady, untilPlanned)
	}
	if err := checkOutput(o.output); err != nil {
		return err
	}
	s, obj, err := a.object(ctx, name)
	if err != nil {
		return err
	}
	if err := a.checkNotSuspended(obj); err != nil {
		return err
	}
	timeout := o.timeout
	if timeout == 0 {
		timeout = obj.GetTimeout() + 5*time.Minute
	}
	deadline := time.Now().Add(timeout)
	progress := a.progressOut(o.output)
	var src *sourceResult
	if o.withSource {
		if src, err = a.reconcileSource(ctx, s, obj, progress, deadline, timeout); err != nil {
			return err
		}
		// What the request is judged against is the object as it is now.
		if obj, err = s.terraform(ctx, name); err != nil {
			return err
		}
	}
	wt := watcher{until: o.until}
	if obj.Status.Run != nil {
		wt.runBefore = obj.Status.Run.ID
	}
	if wt.requested, err = s.requestReconcile(ctx, obj); err != nil {
		return err
	}
	fmt.Fprintf(progress, "► requested reconciliation of %s/%s\n", obj.Namespace, obj.Name)
	res := newResult(obj, wt.requested, verdictRequested, "")
	if o.wait {
		res, err = a.waitReconciled(ctx, s, obj, wt, waitOptions{deadline: deadline, timeout: timeout, w: progress})
	}
	if res == nil || o.output == "" {
		return err
	}
	res.Source = src
	return printResult(a.Streams.Out, o.output, res, err)
}

// requestReconcile reads name and sets reconcile.fluxcd.io/requestedAt;
// the patched object carries the requested value.
func (a *app) requestReconcile(ctx context.Context, name string) (*session, *v1alpha1.Terraform, error) {
	s, obj, err := a.object(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	if err := a.checkNotSuspended(obj); err != nil {
		return nil, nil, err
	}
	if _, err := s.requestReconcile(ctx, obj); err != nil {
		return nil, nil, err
	}
	return s, obj, nil
}

func (a *app) checkNotSuspended(obj *v1alpha1.Terraform) error {
	if obj.Spec.Suspend {
		return fmt.Errorf("Terraform %s/%s is suspended: resume it first with %s", obj.Namespace, obj.Name, a.cmdName("resume "+obj.Name))
	}
	return nil
}

// requestReconcile sets reconcile.fluxcd.io/requestedAt on obj and returns
// the value set.
func (s *session) requestReconcile(ctx context.Context, obj *v1alpha1.Terraform) (string, error) {
	requested := newRequest()
	return requested, s.annotate(ctx, obj, meta.ReconcileRequestAnnotation, requested)
}

// newRequest is a reconcile.fluxcd.io/requestedAt value. It is the wall
// clock, not a.Now: the value must differ from any earlier request.
func newRequest() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// oneLine folds a multi-line message into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func (a *app) suspendCommand() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:               "suspend (NAME... | --all)",
		Short:             "Stop reconciling (no plans, applies or drift checks) until resumed",
		Example:           a.examples("suspend", "database network", "--all -n team-a"),
		Args:              a.namesOrAll(&all, "suspend NAME... | --all"),
		ValidArgsFunction: a.completeMoreNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runSuspend(cmd.Context(), args, all)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "suspend every Terraform object in the namespace")
	return cmd
}

func (a *app) resumeCommand() *cobra.Command {
	var all bool
	o := reconcileOptions{wait: true, until: untilReady}
	cmd := &cobra.Command{
		Use:   "resume (NAME... | --all)",
		Short: "Resume reconciling, request a reconcile and wait until Ready, as reconcile does",
		Long: "Resume reconciling suspended objects: spec.suspend is cleared and a reconcile\n" +
			"requested in the same patch, then each object is followed as `reconcile`\n" +
			"follows it by default (--until=ready), with the same exit codes (the worst of\n" +
			"all objects). A plan waiting for approval is waited through until it is\n" +
			"applied or --timeout runs out (exit 3); resume has no --until, so it never\n" +
			"exits 2. In CI, resume with --wait=false, then run reconcile NAME\n" +
			"--until=planned.\n\n" +
			"-o json|yaml prints a list of results, one per object, each as `reconcile -o`\n" +
			"prints it.",
		Example:           a.examples("resume", "database", "--all -n team-a --wait=false", "database network -o json"),
		Args:              a.namesOrAll(&all, "resume NAME... | --all"),
		ValidArgsFunction: a.completeMoreNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runResume(cmd.Context(), args, all, o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&all, "all", false, "resume every suspended Terraform object in the namespace")
	f.BoolVar(&o.wait, "wait", true, "wait until each object is reconciled (--wait=false only resumes)")
	f.DurationVar(&o.timeout, "timeout", 0, "how long to wait for each object (default: its spec.timeout plus 5m)")
	a.outputFlag(cmd, &o.output, "print the results as json or yaml (progress goes to stderr)")
	return cmd
}

// targets are the objects named, or with all every object of the
// namespace; errs are the names that could not be read.
func (a *app) targets(ctx context.Context, s *session, names []string, all bool) (objs []*v1alpha1.Terraform, errs []error) {
	if all {
		var list v1alpha1.TerraformList
		if err := s.c.List(ctx, &list, client.InNamespace(s.ns)); err != nil {
			return nil, []error{s.explain(err, "list", resTerraforms, "Terraform", s.ns, "")}
		}
		slices.SortFunc(list.Items, func(x, y v1alpha1.Terraform) int { return strings.Compare(x.Name, y.Name) })
		for i := range list.Items {
			objs = append(objs, &list.Items[i])
		}
		if len(objs) == 0 {
			fmt.Fprintf(a.Streams.ErrOut, "No Terraform objects found in namespace %s.\n", s.ns)
		}
		return objs, nil
	}
	seen := map[string]bool{}
	for _, name := range names {
		if seen[name] {
			continue
		}
		seen[name] = true
		obj, err := s.terraform(ctx, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		objs = append(objs, obj)
	}
	return objs, errs
}

// failures turns the errors of a command run on several objects into its
// error: one error is itself; several are printed, one a line, and summed
// up, with the worst exit code.
func (a *app) failures(errs []error, total int, what string) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		if total <= 1 {
			return errs[0]
		}
	}
	codes := make([]int, len(errs))
	for i, err := range errs {
		fmt.Fprintf(a.Streams.ErrOut, "✗ %v\n", err)
		codes[i] = ExitCode(err)
	}
	err := fmt.Errorf("%d of %d Terraform objects %s", len(errs), total, what)
	if code := worst(codes...); code != ExitError {
		return &exitError{code: code, err: err}
	}
	return err
}

func (a *app) runSuspend(ctx context.Context, names []string, all bool) error {
	s, err := a.connect()
	if err != nil {
		return err
	}
	objs, errs := a.targets(ctx, s, names, all)
	for _, obj := range objs {
		if err := a.setSuspend(ctx, s, a.Streams.Out, obj, true); err != nil {
			errs = append(errs, err)
		}
	}
	return a.failures(errs, len(objs)+len(errs), "could not be suspended")
}

// runResume resumes the objects and follows each as reconcile does, with
// o.until ready.
func (a *app) runResume(ctx context.Context, names []string, all bool, o reconcileOptions) error {
	if err := checkOutput(o.output); err != nil {
		return err
	}
	s, err := a.connect()
	if err != nil {
		return err
	}
	progress := a.progressOut(o.output)
	objs, errs := a.targets(ctx, s, names, all)
	total := len(objs) + len(errs)
	if all {
		objs = slices.DeleteFunc(objs, func(obj *v1alpha1.Terraform) bool { return !obj.Spec.Suspend })
	}
	type resumed struct {
		obj      *v1alpha1.Terraform
		w        watcher
		deadline time.Time
		timeout  time.Duration
		res      *reconcileResult
	}
	// One per object, in the order named, for -o.
	each := make([]*resumed, 0, len(objs))
	var waits []*resumed
	start := time.Now()
	for _, obj := range objs {
		r := &resumed{obj: obj, w: watcher{until: o.until, requested: newRequest()}}
		each = append(each, r)
		if obj.Status.Run != nil {
			r.w.runBefore = obj.Status.Run.ID
		}
		if !obj.Spec.Suspend {
			fmt.Fprintf(progress, "Terraform %s/%s is not suspended.\n", obj.Namespace, obj.Name)
			r.res = newResult(obj, "", verdictNotSuspended, "not suspended: nothing requested")
			continue
		}
		if err := a.setSuspend(ctx, s, progress, obj, false, r.w.requested); err != nil {
			errs = append(errs, err)
			r.res = newResult(obj, "", verdictFailed, err.Error())
			continue
		}
		r.timeout = o.timeout
		if r.timeout == 0 {
			r.timeout = obj.GetTimeout() + 5*time.Minute
		}
		r.deadline = start.Add(r.timeout)
		r.res = newResult(obj, r.w.requested, verdictRequested, "")
		waits = append(waits, r)
	}
	if o.wait {
		for _, r := range waits {
			opts := waitOptions{deadline: r.deadline, timeout: r.timeout, w: progress}
			if len(waits) > 1 {
				opts.prefix = r.obj.Name + ": "
			}
			res, err := a.waitReconciled(ctx, s, r.obj, r.w, opts)
			if err != nil {
				if ctx.Err() != nil {
					return err
				}
				errs = append(errs, err)
			}
			if res == nil {
				res = newResult(r.obj, r.w.requested, verdictFailed, err.Error())
			}
			r.res = res
		}
	}
	err = a.failures(errs, total, "are not resumed and ready")
	if o.output == "" {
		return err
	}
	results := make([]*reconcileResult, len(each))
	for i, r := range each {
		results[i] = r.res
	}
	return printResult(a.Streams.Out, o.output, results, err)
}

// setSuspend sets or clears spec.suspend; requested, when given, is a
// reconcile request sent in the same patch.
func (a *app) setSuspend(ctx context.Context, s *session, w io.Writer, obj *v1alpha1.Terraform, suspend bool, requested ...string) error {
	if obj.Spec.Suspend == suspend {
		if suspend {
			fmt.Fprintf(w, "Terraform %s/%s is already suspended.\n", obj.Namespace, obj.Name)
		}
		return nil
	}
	// null removes the field: false is its default.
	var value any
	if suspend {
		value = true
	}
	patch := map[string]any{"spec": map[string]any{"suspend": value}}
	if len(requested) > 0 {
		patch["metadata"] = map[string]any{"annotations": map[string]string{meta.ReconcileRequestAnnotation: requested[0]}}
	}
	if err := s.mergePatch(ctx, obj, patch); err != nil {
		return err
	}
	if suspend {
		fmt.Fprintf(w, "Suspended %s/%s: no plan, apply, drift check or destroy runs until %s.\n", obj.Namespace, obj.Name, a.cmdName("resume "+obj.Name))
	} else {
		fmt.Fprintf(w, "Resumed %s/%s.\n", obj.Namespace, obj.Name)
	}
	return nil
}
