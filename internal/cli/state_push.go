package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"

	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/tfstate"
	"github.com/landform-dev/landform/internal/unsavedstate"
)

func (a *app) statePushCommand() *cobra.Command {
	var force bool
	var file string
	cmd := &cobra.Command{
		Use:   "push NAME",
		Short: "Write a state an apply could not save into the object's backend",
		Long: "When the engine cannot write the state at the end of an apply or destroy (the\n" +
			"API server was away), Landform keeps that state: its runner retries writing it\n" +
			"until the run's deadline, and a copy waits in Secret tfunsaved-NAME-0,\n" +
			"which the controller writes into the backend before the next run. This\n" +
			"command does the same by hand, for when the controller cannot: the backend\n" +
			"holds a state of another lineage or a newer serial (someone wrote it since),\n" +
			"and a person must decide which one is right.\n\n" +
			"It takes the state lock as `tofu state push` does, so it refuses while a run\n" +
			"holds it, and refuses what `tofu state push` refuses unless --force is given.\n" +
			"Once the state is written, the Secret is deleted. The state is written as the\n" +
			"engine wrote it: an OpenTofu-encrypted state stays encrypted.\n\n" +
			"--file pushes a state file instead, such as the unsaved.tfstate a local runner\n" +
			"leaves in its directory when the controller stopped before it could keep a\n" +
			"copy (the controller logs where at its next start): it is kept in the Secret\n" +
			"first, so that nothing plans before it is written.",
		Args:              a.oneName("state push NAME"),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runStatePush(cmd.Context(), args[0], file, force)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "write the kept state even over a state of another lineage or a newer serial")
	cmd.Flags().StringVar(&file, "file", "", "push this state file (as the engine wrote it) instead of the one kept in the Secret")
	return cmd
}

func (a *app) runStatePush(ctx context.Context, name, file string, force bool) error {
	s, err := a.connect()
	if err != nil {
		return err
	}
	obj, err := s.terraform(ctx, name)
	if err != nil {
		return err
	}
	store := unsavedstate.Store{Client: s.c}
	secret := unsavedstate.SecretName(obj)
	if file != "" {
		if err := a.keepFile(ctx, s, store, obj, file); err != nil {
			return err
		}
	}
	st, err := store.Read(ctx, obj)
	if err != nil {
		return s.explain(err, "get", "secrets", "Secret", obj.Namespace, secret)
	}
	w := a.Streams.Out
	if st == nil {
		fmt.Fprintf(w, "Terraform %s/%s keeps no unsaved state: its backend holds the latest one.\n", obj.Namespace, obj.Name)
		return nil
	}
	fmt.Fprintf(w, "Unsaved state of %s/%s (Secret %s):\n", obj.Namespace, obj.Name, secret)
	fmt.Fprintf(w, "  Run:      %s\n", orDash(st.Run))
	fmt.Fprintf(w, "  State:    %s\n", st.Identity)
	if !st.Kept.IsZero() {
		fmt.Fprintf(w, "  Kept:     %s\n", a.when(st.Kept))
	}
	if b := obj.Spec.BackendConfig; b != nil && b.CustomConfiguration != "" {
		return fmt.Errorf("Terraform %s/%s keeps its state in a custom backend, which Landform does not write: "+
			"`kubectl get secret -n %s %s -o jsonpath='{.data.tfstate}' | base64 -d > unsaved.tfstate`, `tofu state push unsaved.tfstate` in the module, then delete the Secret",
			obj.Namespace, obj.Name, obj.Namespace, secret)
	}
	if run := obj.Status.Run; run != nil {
		return fmt.Errorf("%s run %s is in flight: its runner writes the state before it ends, and the controller the kept one before the next run; wait for it (%s)",
			run.Action, run.ID, a.cmdName("status "+obj.Name))
	}
	kube, err := kubernetes.NewForConfig(s.cfg)
	if err != nil {
		return err
	}
	proc, err := statelock.CurrentProcess()
	if err != nil {
		return fmt.Errorf("identifying this process for the state lock: %w", err)
	}
	holder := statelock.Holder{Run: "state-push", Tool: "landform state push", Process: proc}
	backend := unsavedstate.Backend{Secrets: kube.CoreV1().Secrets(obj.Namespace), Leases: kube.CoordinationV1().Leases(obj.Namespace)}
	pushed, err := store.Push(ctx, obj, backend, holder, force)
	var locked *statelock.LockedError
	switch {
	case errors.As(err, &locked):
		i := locked.Info
		return fmt.Errorf("the state is locked by %s (lock %s, %s since %s): wait for that run to end, or release a lock whose holder is gone with %s",
			orDash(i.Who), i.ID, orDash(i.Operation), i.Created.UTC().Format(time.RFC3339), a.cmdName("unlock "+obj.Name))
	case tfstate.IsRefused(err):
		return fmt.Errorf("not written: %v; if the kept state is the right one (it holds what the apply created), run %s; to discard it, delete Secret %s/%s",
			err, a.cmdName("state push "+obj.Name+" --force"), obj.Namespace, secret)
	case err != nil:
		return s.explain(err, "update", "secrets", "Secret", obj.Namespace, names.StateSecret(obj))
	case pushed == nil:
		fmt.Fprintln(w, "It was written meanwhile: nothing to do.")
		return nil
	}
	if pushed.Written {
		fmt.Fprintf(w, "Wrote it to Secret %s, over %s, and deleted Secret %s.\n", names.StateSecret(obj), describeIdentity(pushed.Previous), secret)
	} else {
		fmt.Fprintf(w, "Secret %s holds it already; deleted Secret %s.\n", names.StateSecret(obj), secret)
	}
	fmt.Fprintf(w, "The next run plans from it (%s runs one now).\n", a.cmdName("reconcile "+obj.Name))
	return nil
}

func describeIdentity(id tfstate.Identity) string {
	if id.Lineage == "" {
		return "an empty state"
	}
	return id.String()
}

// keepFile keeps the state file path as obj's unsaved state, unless
// another one is kept already.
func (a *app) keepFile(ctx context.Context, s *session, store unsavedstate.Store, obj *v1alpha1.Terraform, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if _, err := tfstate.ReadIdentity(data); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	secret := unsavedstate.SecretName(obj)
	st, err := store.Stat(ctx, obj)
	if err != nil {
		return s.explain(err, "get", "secrets", "Secret", obj.Namespace, secret)
	}
	if st != nil && st.Digest != digest.FromBytes(data) {
		return fmt.Errorf("Secret %s/%s keeps another unsaved state (%s, of run %s): push that one first, or delete the Secret to discard it",
			obj.Namespace, secret, st.Identity, orDash(st.Run))
	}
	_, err = store.Keep(ctx, obj, "file "+filepath.Base(path), data, a.Now())
	return s.explain(err, "update", "secrets", "Secret", obj.Namespace, secret)
}
