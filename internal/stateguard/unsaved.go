package stateguard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/custody"
	"github.com/landform-dev/landform/internal/metrics"
	"github.com/landform-dev/landform/internal/outcome"
	"github.com/landform-dev/landform/internal/runs"
	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/tfstate"
	"github.com/landform-dev/landform/internal/unsavedstate"
)

// PushUnsaved writes the state an earlier apply or destroy could not save,
// kept in Secret tfunsaved-<name>-0, into the backend before any run
// starts (and before a deletion lets go of the state): a plan from the
// backend's older state would create again what that apply created. It
// does so as `landform state push` does, under the state lock: a lock
// held by a runner that is gone is released first, any other holder waits;
// a state the backend refuses (another lineage, a newer serial) waits for a
// person. A custom backend's state Landform cannot write: a person pushes
// it. One metadata read when there is nothing to push
// (custody.Keeper.PushUnsaved); this turns what it found into conditions.
func (g *Guard) PushUnsaved(ctx context.Context, obj *infrav1.Terraform) error {
	st, pushed, err := g.Keeper.PushUnsaved(ctx, obj)
	if st == nil && err != nil {
		return outcome.Retry(infrav1.StateUnsavedReason, "looking for a state an apply could not save (Secret %s): %v", unsavedstate.SecretName(obj), err)
	}
	// The gauge follows what is found here, not only what this process
	// saw: a state `landform state push` wrote (or a person discarded)
	// clears it, one kept before a restart sets it again.
	metrics.SetStateUnsaved(obj.Namespace, obj.Name, st != nil && err != nil)
	if st == nil {
		return nil
	}
	secret := unsavedstate.SecretName(obj)
	what := fmt.Sprintf("the state that run %s could not save (%s), kept in Secret %s,", OrUnknown(st.Run), st.Identity, secret)
	var locked *statelock.LockedError
	var elsewhere *unsavedstate.ElsewhereError
	switch {
	case errors.As(err, &elsewhere):
		return outcome.WaitingFor(infrav1.StateUnsavedReason, obj.GetRetryInterval(),
			"%s is not written to the backend, and nothing runs until it is: %v", what, err)
	case errors.Is(err, custody.ErrNotOurBackend):
		return outcome.WaitingFor(infrav1.StateUnsavedReason, obj.GetRetryInterval(),
			"%s must be written to the backend before anything runs, and Landform writes only its default backend: push it with the backend's own tools "+
				"(`kubectl get secret -n %s %s -o jsonpath='{.data.tfstate}' | base64 -d > unsaved.tfstate`, then `tofu state push unsaved.tfstate`) and delete the Secret",
			what, obj.Namespace, secret)
	case errors.As(err, &locked):
		i := locked.Info
		return g.LockHeld(ctx, obj, map[string]string{"id": i.ID, "who": i.Who, "operation": i.Operation, "created": i.Created.UTC().Format(time.RFC3339)})
	case tfstate.IsRefused(err):
		msg := fmt.Sprintf("%s cannot be written to the backend: %v; nothing runs until a person decides which state is right: "+
			"compare them first (their serials and lineages are above; `kubectl get secret -n %s %s -o jsonpath='{.data.tfstate}' | base64 -d` shows what the kept one holds); "+
			"only if it holds what that run did, `landform state push %s --force` writes it over the backend's state, and the next plan starts from it; deleting the Secret discards it",
			what, err, obj.Namespace, secret, obj.Name)
		if conditions.GetReason(obj, meta.ReadyCondition) != infrav1.StateUnsavedReason {
			g.Events.Event(obj, obj.Status.LastAttemptedRevision, corev1.EventTypeWarning, infrav1.StateUnsavedReason, "%s", msg)
		}
		return outcome.WaitingFor(infrav1.StateUnsavedReason, obj.GetRetryInterval(), "%s", msg)
	case err != nil:
		return outcome.Retry(infrav1.StateUnsavedReason, "writing %s to the backend before the next run: %v", what, err)
	}
	if pushed == nil {
		return nil
	}
	ctrl.LoggerFrom(ctx).Info("wrote a state an apply could not save", "run", st.Run, "state", st.Identity.String())
	g.Events.Event(obj, obj.Status.LastAttemptedRevision, corev1.EventTypeNormal, infrav1.StatePersistedReason,
		"wrote the state that run %s could not save (%s) to the backend, over %s", OrUnknown(st.Run), st.Identity, pushed.Previous)
	return nil
}

// PersistProgress is the progress of a run whose engine could not save the
// state, which its runner retries writing; nil for any other run.
func (g *Guard) PersistProgress(obj *infrav1.Terraform, h *runs.Handle, what, runnerID string, after time.Duration) *outcome.Outcome {
	p := g.Runs.StatePersist(h)
	if p.Digest == "" || p.Saved {
		return nil
	}
	kept := ""
	if p.Kept {
		kept = fmt.Sprintf(" (a copy is kept in Secret %s)", unsavedstate.SecretName(obj))
	}
	msg := fmt.Sprintf("%s: terraform could not write the state to the backend; runner %s keeps it%s and retries writing it until the run's deadline", what, runnerID, kept)
	if conditions.GetReason(obj, meta.ReadyCondition) != infrav1.StatePersistRetryingReason {
		g.Events.Event(obj, obj.Status.Run.Revision, corev1.EventTypeWarning, infrav1.StatePersistRetryingReason, "%s", msg)
	}
	o := outcome.Progress(infrav1.StatePersistRetryingReason, after, "%s", msg)
	return &o
}

// Persisted records, for a run that ended well, that its runner wrote a
// state the engine could not save.
func (g *Guard) Persisted(obj *infrav1.Terraform, run *infrav1.RunStatus, h *runs.Handle) {
	if p := g.Runs.StatePersist(h); p.Saved {
		g.Events.PlanEvent(obj, run.Plan, run.Revision, corev1.EventTypeNormal, infrav1.StatePersistedReason,
			"%s run %s: terraform could not write the state to the backend; its runner did", run.Action, run.ID)
	}
}
