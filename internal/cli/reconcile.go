package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/spf13/cobra"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

func (a *app) reconcileCommand() *cobra.Command {
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "reconcile NAME",
		Short: "Ask the controller to reconcile now; --wait follows it until Ready or failure",
		Long: "Ask the controller to reconcile now, as `flux reconcile` does (the annotation\n" +
			meta.ReconcileRequestAnnotation + " is set to the current time).\n\n" +
			"With --wait, progress is printed until the controller has handled the request:\n" +
			"the exit code is 0 when the object is Ready, and 1 with the reason when it is\n" +
			"not (a failure, or a plan waiting for approval).",
		Example:           "  " + a.cmdName("reconcile") + " database --wait",
		Args:              a.oneName("reconcile NAME"),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, obj, err := a.requestReconcile(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(a.Streams.Out, "► requested reconciliation of %s/%s\n", obj.Namespace, obj.Name)
			if !wait {
				return nil
			}
			if timeout == 0 {
				timeout = obj.GetTimeout() + 5*time.Minute
			}
			return a.waitReconciled(cmd.Context(), s, obj, timeout)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "follow progress until the request is handled")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "how long --wait waits (default: the object's spec.timeout plus 5m)")
	return cmd
}

// requestReconcile sets reconcile.fluxcd.io/requestedAt; the patched object
// carries the requested value.
func (a *app) requestReconcile(ctx context.Context, name string) (*session, *v1alpha1.Terraform, error) {
	s, obj, err := a.object(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	if obj.Spec.Suspend {
		return nil, nil, fmt.Errorf("Terraform %s/%s is suspended: resume it first with %s", obj.Namespace, obj.Name, a.cmdName("resume "+obj.Name))
	}
	// The wall clock, not a.Now: the value must differ from any earlier request.
	if err := s.annotate(ctx, obj, meta.ReconcileRequestAnnotation, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		return nil, nil, err
	}
	return s, obj, nil
}

// waitReconciled polls obj until the controller has handled the request
// it carries, printing each new step.
func (a *app) waitReconciled(ctx context.Context, s *session, obj *v1alpha1.Terraform, timeout time.Duration) error {
	requested := obj.GetAnnotations()[meta.ReconcileRequestAnnotation]
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(a.PollInterval)
	defer tick.Stop()
	last := ""
	for {
		current, err := s.terraform(ctx, obj.Name)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return err
		}
		obj = current
		if done, err := a.handled(obj, requested); done {
			return err
		}
		if step := progress(obj); step != last {
			fmt.Fprintf(a.Streams.Out, "◎ %s\n", step)
			last = step
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("timed out after %s waiting for %s/%s (last: %s); check that the controller runs (%s)",
				timeout, obj.Namespace, obj.Name, last, a.cmdName("version"))
		case <-tick.C:
		}
	}
}

// handled reports whether the controller handled the request, and the
// outcome: nil when Ready, an error saying why not otherwise.
func (a *app) handled(obj *v1alpha1.Terraform, requested string) (bool, error) {
	if obj.Status.LastHandledReconcileAt != requested {
		return false, nil
	}
	ready := apimeta.FindStatusCondition(obj.Status.Conditions, meta.ReadyCondition)
	switch {
	case ready == nil || ready.ObservedGeneration != obj.Generation && ready.ObservedGeneration != 0:
		return false, nil
	case ready.Status == metav1.ConditionTrue:
		fmt.Fprintf(a.Streams.Out, "✔ %s\n", oneLine(ready.Message))
		return true, nil
	case ready.Status == metav1.ConditionFalse && ready.Reason != v1alpha1.ProgressingReason && ready.Reason != progressingWithRetry:
		fmt.Fprintf(a.Streams.Out, "✗ %s\n", ready.Reason)
		return true, fmt.Errorf("Terraform %s/%s is not ready (%s): %s", obj.Namespace, obj.Name, ready.Reason, oneLine(ready.Message))
	}
	return false, nil
}

// progress is the step an unfinished reconcile is at.
func progress(obj *v1alpha1.Terraform) string {
	if c := apimeta.FindStatusCondition(obj.Status.Conditions, meta.ReconcilingCondition); c != nil && c.Status == metav1.ConditionTrue && c.Message != "" {
		return oneLine(c.Message)
	}
	return "waiting for the controller"
}

// oneLine folds a multi-line message into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func (a *app) suspendCommand() *cobra.Command {
	return &cobra.Command{
		Use:               "suspend NAME",
		Short:             "Stop reconciling (no plans, applies or drift checks) until resumed",
		Args:              a.oneName("suspend NAME"),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.setSuspend(cmd.Context(), args[0], true)
		},
	}
}

func (a *app) resumeCommand() *cobra.Command {
	return &cobra.Command{
		Use:               "resume NAME",
		Short:             "Resume reconciling a suspended object",
		Args:              a.oneName("resume NAME"),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.setSuspend(cmd.Context(), args[0], false)
		},
	}
}

func (a *app) setSuspend(ctx context.Context, name string, suspend bool) error {
	s, obj, err := a.object(ctx, name)
	if err != nil {
		return err
	}
	if obj.Spec.Suspend == suspend {
		state := "already suspended"
		if !suspend {
			state = "not suspended"
		}
		fmt.Fprintf(a.Streams.Out, "Terraform %s/%s is %s.\n", obj.Namespace, obj.Name, state)
		return nil
	}
	// null removes the field: false is its default.
	var value any
	if suspend {
		value = true
	}
	if err := s.mergePatch(ctx, obj, map[string]any{"spec": map[string]any{"suspend": value}}); err != nil {
		return err
	}
	if suspend {
		fmt.Fprintf(a.Streams.Out, "Suspended %s/%s: no plan, apply, drift check or destroy runs until %s.\n", obj.Namespace, obj.Name, a.cmdName("resume "+obj.Name))
	} else {
		fmt.Fprintf(a.Streams.Out, "Resumed %s/%s.\n", obj.Namespace, obj.Name)
	}
	return nil
}
