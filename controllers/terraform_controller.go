package controllers

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/patch"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/planstore"
	"github.com/landform-dev/landform/internal/source"
)

const (
	reconcileRequestAnnotation = meta.ReconcileRequestAnnotation
	fieldOwner                 = "landform-controller"
)

// ownedConditions are the conditions this controller writes.
var ownedConditions = []string{
	meta.ReadyCondition, meta.ReconcilingCondition, meta.StalledCondition,
	infrav1.PlannedCondition, infrav1.AppliedCondition, infrav1.DriftedCondition,
	infrav1.StateLockedCondition, infrav1.OutputsWrittenCondition,
}

// TerraformReconciler reconciles Terraform objects.
type TerraformReconciler struct {
	client.Client
	APIReader     client.Reader
	EventRecorder record.EventRecorder
	Fetcher       *source.Fetcher
	Plans         planstore.Store
	Placer        placement.Placer
	// AllowCrossNamespaceRefs lets sourceRef and dependsOn name objects in
	// other namespaces; refused by default so tenants stay apart.
	AllowCrossNamespaceRefs bool
	// Now is the clock; tests may replace it.
	Now func() time.Time
}

// +kubebuilder:rbac:groups=infra.landform.dev,resources=terraforms,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infra.landform.dev,resources=terraforms/status;terraforms/finalizers,verbs=get;update;patch
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=gitrepositories;ocirepositories;buckets,verbs=get;list;watch
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
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	patcher := patch.NewSerialPatcher(obj, r.Client)
	start := time.Now()

	defer func() {
		summarize(obj, retErr)
		recordMetrics(obj, retErr, time.Since(start))
		if err := patcher.Patch(ctx, obj,
			patch.WithOwnedConditions{Conditions: ownedConditions},
			patch.WithForceOverwriteConditions{},
			patch.WithFieldOwner(fieldOwner),
		); err != nil {
			// Removing the finalizer deletes the object before its status is written.
			if err = kerrors.FilterOut(err, apierrors.IsNotFound); err != nil {
				retErr = kerrors.NewAggregate([]error{retErr, err})
				return
			}
		}
		if retErr != nil {
			ctrl.LoggerFrom(ctx).Info("reconcile did not finish", "reason", errorReason(retErr, infrav1.ProgressingReason), "error", retErr.Error())
		}
		result, retErr = resultFor(retErr, result.RequeueAfter, obj.GetRetryInterval())
	}()

	if !obj.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, obj)
	}
	if !controllerutil.ContainsFinalizer(obj, infrav1.Finalizer) {
		controllerutil.AddFinalizer(obj, infrav1.Finalizer)
		conditions.MarkReconciling(obj, infrav1.ProgressingReason, "starting")
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	if obj.Spec.Suspend {
		return ctrl.Result{}, nil
	}
	return r.reconcile(ctx, patcher, obj)
}

// reconcile runs the state machine once: gather inputs, decide, act.
func (r *TerraformReconciler) reconcile(ctx context.Context, patcher *patch.SerialPatcher, obj *infrav1.Terraform) (ctrl.Result, error) {
	if err := r.checkNamespaces(obj); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.checkDependencies(ctx, obj); err != nil {
		return ctrl.Result{}, err
	}
	ws, err := r.prepareWorkspace(ctx, obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	obj.Status.LastAttemptedRevision = ws.artifact.Revision

	meta, err := r.storedPlan(ctx, obj)
	if err != nil {
		return ctrl.Result{}, err
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
		return ctrl.Result{RequeueAfter: d.after}, nil
	case actionWait:
		return ctrl.Result{}, waiting(infrav1.PlanPendingReason, d.after, "%s", pendingMessage(obj))
	}

	// Show progress while terraform runs: this is the one intermediate patch.
	conditions.MarkReconciling(obj, infrav1.ProgressingReason, "running %s for revision %s", d.action, ws.artifact.Revision)
	if err := patcher.Patch(ctx, obj, patch.WithOwnedConditions{Conditions: ownedConditions}, patch.WithFieldOwner(fieldOwner)); err != nil {
		return ctrl.Result{}, fmt.Errorf("showing progress: %w", err)
	}
	return r.run(ctx, obj, ws, d)
}

func (r *TerraformReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
