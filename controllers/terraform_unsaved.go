package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/metrics"
	"github.com/landform-dev/landform/internal/runs"
	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/tfstate"
	"github.com/landform-dev/landform/internal/unsavedstate"
)

// unsavedStates keeps the states that applies and destroys could not write
// to their backend (Secrets tfunsaved-<name>-<i>).
func (r *TerraformReconciler) unsavedStates() unsavedstate.Store {
	return unsavedstate.Store{Client: r.Client}
}

// pushUnsaved writes the state an earlier apply or destroy could not save,
// kept in Secret tfunsaved-<name>-0, into the backend before any run
// starts (and before a deletion lets go of the state): a plan from the
// backend's older state would create again what that apply created. It
// does so as `landform state push` does, under the state lock: a lock
// held by a runner that is gone is released first, any other holder waits;
// a state the backend refuses (another lineage, a newer serial) waits for a
// person. A custom backend's state Landform cannot write: a person pushes
// it. One metadata read when there is nothing to push.
func (r *TerraformReconciler) pushUnsaved(ctx context.Context, obj *infrav1.Terraform) error {
	store := r.unsavedStates()
	st, err := store.Stat(ctx, obj)
	if err != nil {
		return retry(infrav1.StateUnsavedReason, "looking for a state an apply could not save (Secret %s): %v", unsavedstate.SecretName(obj), err)
	}
	if st == nil {
		return nil
	}
	secret := unsavedstate.SecretName(obj)
	what := fmt.Sprintf("the state that run %s could not save (%s), kept in Secret %s,", orUnknown(st.Run), st.Identity, secret)
	if customBackend(obj) != "" || r.Secrets == nil || r.Leases == nil {
		return waiting(infrav1.StateUnsavedReason, obj.GetRetryInterval(),
			"%s must be written to the backend before anything runs, and Landform writes only its default backend: push it with the backend's own tools "+
				"(`kubectl get secret -n %s %s -o jsonpath='{.data.tfstate}' | base64 -d > unsaved.tfstate`, then `tofu state push unsaved.tfstate`) and delete the Secret",
			what, obj.Namespace, secret)
	}
	holder, err := controllerHolder()
	if err != nil {
		return retry(infrav1.StateUnsavedReason, "writing %s: %v", what, err)
	}
	pushed, err := store.Push(ctx, obj, unsavedstate.Backend{Secrets: r.Secrets(obj.Namespace), Leases: r.Leases(obj.Namespace)}, holder, false)
	var locked *statelock.LockedError
	switch {
	case errors.As(err, &locked):
		i := locked.Info
		return r.lockHeld(ctx, obj, map[string]string{"id": i.ID, "who": i.Who, "operation": i.Operation, "created": i.Created.UTC().Format(time.RFC3339)})
	case tfstate.IsRefused(err):
		msg := fmt.Sprintf("%s cannot be written to the backend: %v; nothing runs until a person decides which state is right: "+
			"compare them first (their serials and lineages are above; `kubectl get secret -n %s %s -o jsonpath='{.data.tfstate}' | base64 -d` shows what the kept one holds); "+
			"only if it holds what that run did, `landform state push %s --force` writes it over the backend's state, and the next plan starts from it; deleting the Secret discards it",
			what, err, obj.Namespace, secret, obj.Name)
		if conditions.GetReason(obj, meta.ReadyCondition) != infrav1.StateUnsavedReason {
			r.event(obj, obj.Status.LastAttemptedRevision, corev1.EventTypeWarning, infrav1.StateUnsavedReason, "%s", msg)
		}
		return waiting(infrav1.StateUnsavedReason, obj.GetRetryInterval(), "%s", msg)
	case err != nil:
		return retry(infrav1.StateUnsavedReason, "writing %s to the backend before the next run: %v", what, err)
	}
	if pushed == nil {
		return nil
	}
	metrics.SetStateUnsaved(obj.Namespace, obj.Name, false)
	ctrl.LoggerFrom(ctx).Info("wrote a state an apply could not save", "run", st.Run, "state", st.Identity.String())
	r.event(obj, obj.Status.LastAttemptedRevision, corev1.EventTypeNormal, infrav1.StatePersistedReason,
		"wrote the state that run %s could not save (%s) to the backend, over %s", orUnknown(st.Run), st.Identity, pushed.Previous)
	return nil
}

// persistProgress is the progress of a run whose engine could not save the
// state, which its runner retries writing; nil for any other run.
func (r *TerraformReconciler) persistProgress(obj *infrav1.Terraform, h *runs.Handle, what, runnerID string, after time.Duration) error {
	p := r.runs.StatePersist(h)
	if p.Digest == "" || p.Saved {
		return nil
	}
	kept := ""
	if p.Kept {
		kept = fmt.Sprintf(" (a copy is kept in Secret %s)", unsavedstate.SecretName(obj))
	}
	msg := fmt.Sprintf("%s: terraform could not write the state to the backend; runner %s keeps it%s and retries writing it until the run's deadline", what, runnerID, kept)
	if conditions.GetReason(obj, meta.ReadyCondition) != infrav1.StatePersistRetryingReason {
		r.event(obj, obj.Status.Run.Revision, corev1.EventTypeWarning, infrav1.StatePersistRetryingReason, "%s", msg)
	}
	return inProgress(infrav1.StatePersistRetryingReason, after, "%s", msg)
}

// persisted records, for a run that ended well, that its runner wrote a
// state the engine could not save.
func (r *TerraformReconciler) persisted(obj *infrav1.Terraform, run *infrav1.RunStatus, h *runs.Handle) {
	if p := r.runs.StatePersist(h); p.Saved {
		r.planEvent(obj, run.Plan, run.Revision, corev1.EventTypeNormal, infrav1.StatePersistedReason,
			"%s run %s: terraform could not write the state to the backend; its runner did", run.Action, run.ID)
	}
}

// controllerHolder is who the controller takes a state lock as: this
// process, which a restarted controller on the same host can prove gone.
var controllerHolder = sync.OnceValues(func() (statelock.Holder, error) {
	proc, err := statelock.CurrentProcess()
	if err != nil {
		return statelock.Holder{}, fmt.Errorf("identifying the controller process for the state lock: %w", err)
	}
	return statelock.Holder{Run: "state-push", Tool: "landform-controller", Process: proc}, nil
})
