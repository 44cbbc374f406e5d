package controllers

import (
	"context"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/custody"
	"github.com/landform-dev/landform/internal/inputs"
	"github.com/landform-dev/landform/internal/outcome"
	"github.com/landform-dev/landform/internal/outputs"
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/planstore"
	"github.com/landform-dev/landform/internal/runs"
	"github.com/landform-dev/landform/internal/source"
	"github.com/landform-dev/landform/internal/stateguard"
)

const (
	reconcileRequestAnnotation = meta.ReconcileRequestAnnotation
	// FieldOwner is the field manager of the controller's writes.
	FieldOwner = "landform-controller"
)

// TerraformReconciler reconciles Terraform objects.
type TerraformReconciler struct {
	client.Client
	APIReader     client.Reader
	EventRecorder record.EventRecorder
	// Notifier posts an event to notification-controller without a
	// Kubernetes event (NewNotifier); nil without --events-addr. The
	// commit-status event of a success goes through it alone.
	Notifier record.EventRecorder
	Fetcher  *source.Fetcher
	Plans    planstore.Store
	Placer   placement.Placer
	// Runs starts, follows and finishes the runs of this process
	// (internal/runs); the process adds it to the manager. Passed in, not
	// built here: it calls back into Reconcile while draining, and the
	// process decides its slots and drain.
	Runs *runs.Tracker
	// Custody owns the states: who owns each, the identity runners reach
	// it with, its lock, kept versions and artifact (internal/custody).
	Custody *custody.Keeper
	// AllowCrossNamespaceRefs lets sourceRef and dependsOn name objects in
	// other namespaces; refused by default so tenants stay apart.
	AllowCrossNamespaceRefs bool
	// Engines are where spec.engine's versions come from
	// (internal/inputs).
	Engines inputs.EngineSources
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// Jitter spreads drift checks: it returns a requeue delay near the one
	// it is given (--interval-jitter-percentage, with fluxcd/pkg/runtime/
	// jitter). Nil: none.
	Jitter func(time.Duration) time.Duration

	// report records events and metrics (Flux's gotk_* series among them).
	report *reporter
	// sourceKinds are the Flux source kinds the API server serves
	// (terraform_sourcekinds.go).
	sourceKinds *source.Served
	// inputs resolve variables, imports, the engine and dependencies
	// (internal/inputs).
	inputs *inputs.Resolver
	// custody owns the states: who owns each, and the identity runners
	// reach it with (internal/custody).
	custody *custody.Keeper
	// state turns what custody finds into outcomes and events
	// (internal/stateguard).
	state *stateguard.Guard
}

// +kubebuilder:rbac:groups=infra.landform.dev,resources=terraforms,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infra.landform.dev,resources=terraforms/status;terraforms/finalizers,verbs=get;update;patch
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=gitrepositories;ocirepositories;buckets;externalartifacts,verbs=get;list;watch
// +kubebuilder:rbac:groups=kustomize.toolkit.fluxcd.io,resources=kustomizations,verbs=get;list;watch
// +kubebuilder:rbac:groups=helm.toolkit.fluxcd.io,resources=helmreleases,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete

// Reconcile is the one reconcile skeleton: get, patcher, deferred status
// write, then deletion, finalizer, suspend, and the state machine.
func (r *TerraformReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	obj := &infrav1.Terraform{}
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			// Gone without its finalizer: nobody collects its run.
			r.Runs.Abandon(req.NamespacedName)
			r.report.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.Runs.Behind(obj) {
		// The cache has not caught up with the write that recorded the run
		// this process started last: acting on this copy would take that
		// run for another process's and give it up.
		if err := r.APIReader.Get(ctx, req.NamespacedName, obj); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	patcher := newObjectPatcher(obj, r.Client, r.APIReader)
	start := time.Now()
	// done is how the reconcile ended when it got through (retErr nil):
	// Done, or Progress while a run goes on.
	var done outcome.Outcome

	defer func() {
		o := outcome.Ended(done, retErr, infrav1.RunnerFailedReason)
		o.Summarize(obj, readyMessage(obj))
		r.report.reconciled(ctx, obj, o, start)
		if err := patcher.Patch(ctx, obj); err != nil {
			// Removing the finalizer deletes the object before its status is written.
			if err = kerrors.FilterOut(err, apierrors.IsNotFound); err != nil {
				retErr = kerrors.NewAggregate([]error{retErr, err})
				return
			}
		}
		// Told once status says it: a commit status never runs ahead.
		r.report.finished(obj, o)
		if o.Cause != nil {
			ctrl.LoggerFrom(ctx).Info("reconcile did not finish", "reason", o.Reason, "error", o.Cause.Error())
		}
		result, retErr = o.Result(obj.GetRetryInterval()), nil
	}()

	if !obj.DeletionTimestamp.IsZero() {
		done, retErr = r.reconcileDelete(ctx, patcher, obj)
		return
	}
	if !controllerutil.ContainsFinalizer(obj, infrav1.Finalizer) {
		// Written with the first status write (which records the first
		// run before it starts), not in a round of its own: nothing that
		// needs the finalizer exists before then.
		controllerutil.AddFinalizer(obj, infrav1.Finalizer)
		conditions.MarkReconciling(obj, infrav1.ProgressingReason, "starting")
	}
	if obj.Spec.Suspend {
		return
	}
	done, retErr = r.reconcile(ctx, patcher, obj)
	return
}

// reconcile runs the state machine once: follow the run in flight, gather
// inputs, decide, act. Acting on a plan or an apply starts a run and
// returns; the run's end brings the object back.
func (r *TerraformReconciler) reconcile(ctx context.Context, patcher *objectPatcher, obj *infrav1.Terraform) (outcome.Outcome, error) {
	var idle *runs.Idle
	var stored *planstore.Plan
	var meta *storedPlan
	var failedRun *infrav1.RunStatus
	var failure error
	if obj.Status.Run != nil {
		c, err := r.inspectRun(ctx, obj)
		if err != nil && (c == nil || c.failed == nil) {
			return outcome.Outcome{}, err
		}
		if c.running != nil {
			return *c.running, nil
		}
		failedRun, failure = c.failed, err
		idle, stored, meta = c.idle, c.plan, c.storedPlan()
		defer idle.Stop()
	}
	if err := r.inputs.CheckNamespaces(obj); err != nil {
		return outcome.Outcome{}, err
	}
	if s := obj.Spec.WriteOutputsToSecret; s != nil && obj.GetDeletionPolicy() == infrav1.DeletionPolicyOrphan && obj.Generation != obj.Status.ObservedGeneration &&
		mayHoldReference(obj) {
		// Switched to Orphan: the outputs Secret must outlive the object
		// from now on, whatever deletes it (a foreground deletion's garbage
		// collector included).
		if err := outputs.Release(ctx, r.Client, obj, s.Name); err != nil {
			return outcome.Outcome{}, outcome.Retry(infrav1.OutputsFailedReason, "%v", err)
		}
	}
	if err := r.inputs.Dependencies(ctx, obj); err != nil {
		return outcome.Outcome{}, err
	}
	ws, err := r.prepareWorkspace(ctx, obj)
	if err != nil {
		return outcome.Outcome{}, err
	}
	// One state, one owner, from the first reconcile of this process on
	// (an object upgraded over claims its state before its next run);
	// nothing is made for an object that cannot run yet (dependencies,
	// artifact, inputs).
	if err := r.state.Claim(ctx, obj); err != nil {
		return outcome.Outcome{}, err
	}
	if obj.IsPreview() {
		// The target's state, copied into the preview's own: a new one
		// is a new plan.
		snapshot, err := r.state.Snapshot(ctx, obj, r.now())
		if err != nil {
			return outcome.Outcome{}, err
		}
		ws.inputsDigest = withSnapshot(ws.inputsDigest, snapshot)
	}
	obj.Status.LastAttemptedRevision = ws.artifact.Revision
	if failedRun != nil && (failedRun.InputsDigest == "" || failedRun.InputsDigest == ws.inputsDigest) {
		// The run failed for the inputs as they still are; a run for
		// older inputs says nothing of the new ones, which are planned.
		return outcome.Outcome{}, failure
	}

	if meta == nil {
		if meta, err = r.storedPlan(ctx, obj); err != nil {
			return outcome.Outcome{}, err
		}
	}
	d := decide(obj, observation{
		inputsDigest:   ws.inputsDigest,
		plan:           meta,
		outputsWritten: outputsUpToDate(obj),
		now:            r.now(),
	})
	markApprovalMismatch(obj)
	switch d.action {
	case actionNone:
		return outcome.Done(r.jittered(d.after)), nil
	case actionWait:
		reason := infrav1.PlanPendingReason
		if d.destructive {
			reason = infrav1.DestructivePlanPendingReason
		}
		return outcome.Outcome{}, outcome.WaitingFor(reason, d.after, "%s", pendingMessage(obj))
	case actionOutputs:
		return r.nextCheck(obj), r.refreshOutputs(ctx, obj, ws)
	}
	// What can be refused without the engine is refused before a run
	// creates anything whose outputs could then never be handed over.
	if err := r.checkOutputsSecret(ctx, obj); err != nil {
		return outcome.Outcome{}, err
	}
	if d.action == actionApply {
		return r.startApply(ctx, patcher, obj, ws, idle, stored)
	}
	return r.startRun(ctx, patcher, obj, ws, planRun{drift: d.drift, destroy: obj.Spec.Destroy, priority: priorityOf(obj, d)})
}
