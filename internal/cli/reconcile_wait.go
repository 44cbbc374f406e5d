package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// What `reconcile --until` (and `resume`) wait for.
const (
	// untilReady: the object is Ready (applied, or nothing to apply).
	untilReady = "ready"
	// untilPlanned: the plan the request made is known: no changes,
	// waiting for approval, or being applied.
	untilPlanned = "planned"
)

// runApply is status.run.action of an apply.
const runApply = "apply"

// waitingReasons are the Ready reasons of a reconcile that is neither done
// nor failed: the controller carries on by itself once a dependency, an
// input, the source or the state lock is there, or a run has ended. kstatus
// calls every Ready=False InProgress, a retried failure included; these
// reasons are the ones worth waiting through. Approval (PlanPending) is
// waited for too unless --until=planned, where it is the end.
var waitingReasons = map[string]bool{
	v1alpha1.ProgressingReason:          true,
	v1alpha1.ProgressingWithRetryReason: true,
	v1alpha1.DependencyNotReadyReason:   true,
	v1alpha1.SourceNotReadyReason:       true,
	v1alpha1.InputNotReadyReason:        true,
	v1alpha1.StateLockedReason:          true,
	v1alpha1.StateLockReleasedReason:    true,
	v1alpha1.RunInProgressReason:        true,
	v1alpha1.RunQueuedReason:            true,
	v1alpha1.RunLostReason:              true,
	v1alpha1.PlanUnusableReason:         true,
	v1alpha1.ShuttingDownReason:         true,
	v1alpha1.StatePersistRetryingReason: true,
}

// pendingReasons are the Ready reasons of a plan waiting for approval.
var pendingReasons = map[string]bool{
	v1alpha1.PlanPendingReason:            true,
	v1alpha1.DestructivePlanPendingReason: true,
}

// verdict is how waiting for a reconcile ended; the JSON results' "result".
type verdict string

const (
	stillWaiting verdict = ""
	// verdictReady: Ready (exit 0).
	verdictReady verdict = "ready"
	// verdictApproval: a plan waits for approval (exit 2).
	verdictApproval verdict = "approval-pending"
	// verdictPlanned: with --until=planned, the plan has changes that are
	// being applied, or that planOnly keeps (exit 2).
	verdictPlanned verdict = "changes-planned"
	// verdictFailed: not Ready for a reason waiting does not cure (exit 1).
	verdictFailed verdict = "failed"
	// verdictTimeout: --timeout ran out (exit 3).
	verdictTimeout verdict = "timeout"
	// verdictRequested: --wait=false (exit 0).
	verdictRequested verdict = "requested"
	// verdictNotSuspended: resume found the object not suspended, and
	// requested nothing (exit 0).
	verdictNotSuspended verdict = "not-suspended"
)

// judgement is where one look at the object leaves the wait.
type judgement struct {
	verdict verdict
	// step says in one line where the object is.
	step string
}

// watcher follows one requested reconcile of one object.
type watcher struct {
	// requested is the reconcile.fluxcd.io/requestedAt value sent.
	requested string
	until     string
	// runBefore is the id of the run in flight when the request was made,
	// which says nothing about the request.
	runBefore string
}

// judge decides, from one reading of obj, whether the controller is done
// with the request and how it ended.
func (w watcher) judge(obj *v1alpha1.Terraform) judgement {
	ready := apimeta.FindStatusCondition(obj.Status.Conditions, meta.ReadyCondition)
	if obj.Status.LastHandledReconcileAt != w.requested || ready == nil || ready.ObservedGeneration != 0 && ready.ObservedGeneration != obj.Generation {
		// A step under way is shown; a Ready from before the request is not.
		return judgement{step: progress(obj, nil)}
	}
	res, err := kstatusOf(obj)
	if err != nil {
		return judgement{verdict: verdictFailed, step: err.Error()}
	}
	switch res.Status {
	case kstatus.TerminatingStatus:
		return judgement{verdict: verdictFailed, step: "the object is being deleted"}
	case kstatus.FailedStatus:
		return judgement{verdict: verdictFailed, step: oneLine(res.Message)}
	case kstatus.CurrentStatus:
		if w.until == untilPlanned && obj.Spec.PlanOnly && obj.PendingPlan() != "" && hasChanges(obj.Status.Plan) {
			return judgement{verdict: verdictPlanned, step: oneLine(ready.Message)}
		}
		return judgement{verdict: verdictReady, step: oneLine(ready.Message)}
	}
	run := obj.Status.Run
	switch {
	case pendingReasons[ready.Reason] && w.until == untilPlanned:
		return judgement{verdict: verdictApproval, step: oneLine(ready.Message)}
	case pendingReasons[ready.Reason]:
		return judgement{step: oneLine(ready.Message)}
	case w.until == untilPlanned && run != nil && run.Action == runApply && run.ID != w.runBefore:
		return judgement{verdict: verdictPlanned, step: planSummary(obj.Status.Plan) + " is being applied (approved automatically)"}
	case ready.Status == metav1.ConditionFalse && !waitingReasons[ready.Reason]:
		return judgement{verdict: verdictFailed, step: ready.Reason}
	}
	return judgement{step: progress(obj, ready)}
}

// kstatusOf computes obj's kstatus, as Flux's health checks see it.
func kstatusOf(obj *v1alpha1.Terraform) (*kstatus.Result, error) {
	m, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(v1alpha1.TerraformKind))
	return kstatus.Compute(u)
}

// progress is the step an unfinished reconcile is at: the step under way,
// else what it waits for.
func progress(obj *v1alpha1.Terraform, ready *metav1.Condition) string {
	if c := apimeta.FindStatusCondition(obj.Status.Conditions, meta.ReconcilingCondition); c != nil && c.Status == metav1.ConditionTrue && c.Reason != progressingWithRetry && c.Message != "" {
		return oneLine(c.Message)
	}
	if ready != nil && ready.Message != "" {
		return oneLine(ready.Message)
	}
	return "waiting for the controller"
}

// planSummary is "plan-… (+1 ~2 -0)".
func planSummary(p *v1alpha1.PlanStatus) string {
	if p == nil {
		return "no plan"
	}
	id := p.Pending
	if id == "" {
		id = p.ID
	}
	return orDash(id) + " (" + counts(p) + ")"
}

func hasChanges(p *v1alpha1.PlanStatus) bool {
	return p != nil && p.Add+p.Change+p.Destroy > 0
}

// reconcileResult is what `reconcile -o json|yaml` prints, and `resume -o
// json|yaml` for each object.
type reconcileResult struct {
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	RequestedAt string `json:"requestedAt,omitempty"`
	// Result is how it ended: ready, approval-pending, changes-planned,
	// failed, timeout, requested (--wait=false), or with resume
	// not-suspended.
	Result   verdict `json:"result"`
	ExitCode int     `json:"exitCode"`
	// Message is the last step seen.
	Message string `json:"message,omitempty"`
	// Ready is the Ready condition last seen.
	Ready *conditionResult `json:"ready,omitempty"`
	// Revision is the last applied revision.
	Revision string      `json:"revision,omitempty"`
	Plan     *planResult `json:"plan,omitempty"`
	// Source is the source reconciled first (--with-source).
	Source *sourceResult `json:"source,omitempty"`
}

type conditionResult struct {
	Status  metav1.ConditionStatus `json:"status"`
	Reason  string                 `json:"reason,omitempty"`
	Message string                 `json:"message,omitempty"`
}

// planResult is the last plan in JSON results.
type planResult struct {
	ID string `json:"id,omitempty"`
	// Pending is set when the plan waits for approval (or planOnly keeps it).
	Pending  bool   `json:"pending"`
	Revision string `json:"revision,omitempty"`
	Add      int32  `json:"add"`
	Change   int32  `json:"change"`
	Destroy  int32  `json:"destroy"`
}

func readyResult(obj *v1alpha1.Terraform) *conditionResult {
	c := apimeta.FindStatusCondition(obj.Status.Conditions, meta.ReadyCondition)
	if c == nil {
		return nil
	}
	return &conditionResult{Status: c.Status, Reason: c.Reason, Message: c.Message}
}

func planResultOf(obj *v1alpha1.Terraform) *planResult {
	p := obj.Status.Plan
	if p == nil {
		return nil
	}
	id := p.ID
	if id == "" {
		id = p.Pending
	}
	return &planResult{ID: id, Pending: p.Pending != "", Revision: p.Revision, Add: p.Add, Change: p.Change, Destroy: p.Destroy}
}

// newResult is the result for obj as last read.
func newResult(obj *v1alpha1.Terraform, requested string, v verdict, message string) *reconcileResult {
	return &reconcileResult{
		Namespace: obj.Namespace, Name: obj.Name, RequestedAt: requested,
		Result: v, ExitCode: exitCodeOf(v), Message: message,
		Ready: readyResult(obj), Revision: obj.Status.LastAppliedRevision, Plan: planResultOf(obj),
	}
}

func exitCodeOf(v verdict) int {
	switch v {
	case verdictReady, verdictRequested, verdictNotSuspended:
		return ExitOK
	case verdictApproval, verdictPlanned:
		return ExitPending
	case verdictTimeout:
		return ExitTimeout
	}
	return ExitError
}

// waitOptions say how `reconcile` and `resume` wait.
type waitOptions struct {
	// deadline ends the wait with a timeout.
	deadline time.Time
	timeout  time.Duration
	// w takes the progress lines; prefix starts each (the object's name
	// when several are waited for).
	w      io.Writer
	prefix string
}

// waitReconciled polls obj until the controller has handled the request
// wt carries and it ended as wt.until asks, printing each new step. The
// error says why the command fails, with its exit code.
func (a *app) waitReconciled(ctx context.Context, s *session, obj *v1alpha1.Terraform, wt watcher, opts waitOptions) (*reconcileResult, error) {
	last := ""
	var j judgement
	// The deadline ends the polling, not a request under way: every
	// object resume waits for is looked at once even after it.
	polling, cancel := context.WithDeadline(ctx, opts.deadline)
	defer cancel()
	err := wait.PollUntilContextCancel(polling, a.PollInterval, true, func(context.Context) (bool, error) {
		current, err := s.terraform(ctx, obj.Name)
		if ctx.Err() != nil {
			return false, nil // the poll ends with the context's error
		}
		if err != nil {
			return false, err
		}
		obj = current
		if j = wt.judge(obj); j.verdict != stillWaiting {
			return true, nil
		}
		if j.step != last {
			fmt.Fprintf(opts.w, "%s◎ %s\n", opts.prefix, j.step)
			last = j.step
		}
		return false, nil
	})
	where := obj.Namespace + "/" + obj.Name
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		res := newResult(obj, wt.requested, verdictTimeout, last)
		if obj.Status.LastHandledReconcileAt == wt.requested {
			return res, timedOut(fmt.Errorf("timed out after %s waiting for %s (last: %s)", opts.timeout, where, orDash(last)))
		}
		return res, timedOut(fmt.Errorf("timed out after %s waiting for %s (last: %s); the controller has not handled the request: check that it runs (%s)",
			opts.timeout, where, orDash(last), a.cmdName("version")))
	case err != nil:
		return nil, err
	}
	res := newResult(obj, wt.requested, j.verdict, j.step)
	switch j.verdict {
	case verdictReady:
		fmt.Fprintf(opts.w, "%s✔ %s\n", opts.prefix, j.step)
		return res, nil
	case verdictApproval:
		p := obj.PendingPlan()
		fmt.Fprintf(opts.w, "%s✔ planned: %s\n", opts.prefix, j.step)
		return res, pendingChanges(fmt.Errorf("plan %s of %s waits for approval: review it with %s, approve it with %s",
			p, where, a.cmdName("plan show "+obj.Name), a.cmdName("approve "+obj.Name)))
	case verdictPlanned:
		fmt.Fprintf(opts.w, "%s✔ planned: %s\n", opts.prefix, j.step)
		return res, pendingChanges(fmt.Errorf("the plan of %s has changes: %s", where, planSummary(obj.Status.Plan)))
	}
	ready := apimeta.FindStatusCondition(obj.Status.Conditions, meta.ReadyCondition)
	reason, message := j.step, j.step
	if ready != nil && ready.Status == metav1.ConditionFalse {
		reason, message = ready.Reason, oneLine(ready.Message)
	}
	fmt.Fprintf(opts.w, "%s✗ %s\n", opts.prefix, reason)
	res.Message = message
	return res, fmt.Errorf("Terraform %s is not ready (%s): %s", where, reason, message)
}
