package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/statelock"
)

// lockInfoAnnotation holds the lock's details on the Lease that Terraform's
// and OpenTofu's kubernetes backend uses as the state lock.
const lockInfoAnnotation = statelock.InfoAnnotation

// lockInfo is the backend's statemgr.LockInfo as it marshals it.
type lockInfo = statelock.LockInfo

type unlockOptions struct {
	force bool
	// lockID, when set, is the only lock that may be released.
	lockID string
	output string
}

func (a *app) unlockCommand() *cobra.Command {
	var o unlockOptions
	cmd := &cobra.Command{
		Use:   "unlock NAME",
		Short: "Show who holds the state lock, and release it when that holder is gone",
		Long: "Show who holds the state lock of a Terraform object (the Lease the kubernetes\n" +
			"backend keeps in the object's namespace) and release it when its holder is gone:\n" +
			"a runner Pod that no longer exists or has terminated, or a local runner process\n" +
			"that no longer runs. (The controller releases such locks itself.) A holder\n" +
			"Landform cannot prove gone (a live runner, someone's own terraform) keeps\n" +
			"its lock unless --force is given: releasing a lock that is still used can\n" +
			"corrupt the state.\n\n" +
			"--lock-id releases only the lock of that id, as `tofu force-unlock LOCK_ID`\n" +
			"does: a script that saw a lock never releases the next one.\n\n" +
			"Releasing does what `tofu force-unlock` does: the Lease's holder and lock\n" +
			"info are cleared, the Lease stays.",
		Example:           a.examples("unlock", "database", "database --lock-id 9b1c0e4a-3f2d-4c55-8a61-0d7e2f4b9c3a --force -o json"),
		Args:              a.oneName("unlock NAME"),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(o.output); err != nil {
				return err
			}
			return a.runUnlock(cmd.Context(), args[0], o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.force, "force", false, "release the lock even if its holder may still be running")
	f.StringVar(&o.lockID, "lock-id", "", "release the lock only if its id is this one")
	a.outputFlag(cmd, &o.output, "print the lock and what was done as json or yaml")
	return cmd
}

// unlockResult is what `unlock -o json|yaml` prints.
type unlockResult struct {
	Namespace string      `json:"namespace"`
	Name      string      `json:"name"`
	Lease     string      `json:"lease,omitempty"`
	Locked    bool        `json:"locked"`
	Lock      *lockResult `json:"lock,omitempty"`
	// Released: this command released the lock.
	Released bool `json:"released"`
}

type lockResult struct {
	ID        string     `json:"id"`
	Holder    string     `json:"holder,omitempty"`
	Operation string     `json:"operation,omitempty"`
	Created   *time.Time `json:"created,omitempty"`
	Engine    string     `json:"engine,omitempty"`
	// HolderGone: Landform proved the holder gone; HolderState says how,
	// or why it could not.
	HolderGone  bool   `json:"holderGone"`
	HolderState string `json:"holderState"`
}

func (a *app) runUnlock(ctx context.Context, name string, o unlockOptions) error {
	s, obj, err := a.object(ctx, name)
	if err != nil {
		return err
	}
	if b := obj.Spec.BackendConfig; b != nil && b.CustomConfiguration != "" {
		return fmt.Errorf("Terraform %s/%s keeps its state in a custom backend (spec.backendConfig.customConfiguration): release its lock with that backend's own tools (tofu force-unlock LOCK_ID)", obj.Namespace, obj.Name)
	}
	w := a.Streams.Out
	if o.output != "" {
		w = io.Discard // the result says it all
	}
	leaseName := names.StateLease(obj)
	res := unlockResult{Namespace: obj.Namespace, Name: obj.Name, Lease: leaseName}
	result := func(err error) error {
		if o.output == "" {
			return err
		}
		if perr := printData(a.Streams.Out, o.output, res); perr != nil && err == nil {
			return perr
		}
		return err
	}
	var lease coordinationv1.Lease
	err = s.c.Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: leaseName}, &lease)
	if apierrors.IsNotFound(err) || err == nil && lease.Spec.HolderIdentity == nil {
		fmt.Fprintf(w, "The state of %s/%s is not locked.\n", obj.Namespace, obj.Name)
		if obj.Status.Lock != nil {
			fmt.Fprintln(w, "status.lock still names a holder: the controller clears it at its next run.")
		}
		return result(nil)
	}
	if err != nil {
		return s.explain(err, "get", resLeases, "Lease", obj.Namespace, leaseName)
	}

	info := lockInfo{ID: *lease.Spec.HolderIdentity}
	if raw, ok := lease.Annotations[lockInfoAnnotation]; ok {
		if err := json.Unmarshal([]byte(raw), &info); err != nil {
			info = lockInfo{ID: *lease.Spec.HolderIdentity, Who: "(unreadable lock info)"}
		}
	}
	fmt.Fprintf(w, "State lock of %s/%s (Lease %s):\n", obj.Namespace, obj.Name, leaseName)
	fmt.Fprintf(w, "  ID:         %s\n", info.ID)
	fmt.Fprintf(w, "  Holder:     %s\n", orDash(info.Who))
	fmt.Fprintf(w, "  Operation:  %s\n", orDash(info.Operation))
	fmt.Fprintf(w, "  Since:      %s\n", a.when(info.Created))
	if info.Version != "" {
		fmt.Fprintf(w, "  Engine:     %s\n", info.Version)
	}
	h := holderState(ctx, s, obj, info)
	fmt.Fprintf(w, "  Holder is:  %s\n", h.why)
	res.Locked = true
	res.Lock = &lockResult{ID: info.ID, Holder: info.Who, Operation: info.Operation, Engine: info.Version, HolderGone: h.gone, HolderState: h.why}
	if !info.Created.IsZero() {
		res.Lock.Created = &info.Created
	}
	if o.lockID != "" && o.lockID != info.ID {
		return result(fmt.Errorf("the state of %s/%s is locked by lock %s, not %s: nothing released", obj.Namespace, obj.Name, info.ID, o.lockID))
	}
	if !h.gone {
		if !o.force {
			return result(fmt.Errorf("lock %s kept: its holder %s may still be running; stop it, or re-run with --force once you are sure it has stopped", info.ID, orDash(info.Who)))
		}
		fmt.Fprintln(w, "Releasing it anyway (--force).")
	}

	// What the backend's Unlock does: clear the holder and the lock info,
	// keep the Lease. The update carries the resourceVersion read above, so
	// a lock taken or released meanwhile is left alone.
	lease.Spec.HolderIdentity = nil
	delete(lease.Annotations, lockInfoAnnotation)
	if err := s.c.Update(ctx, &lease, client.FieldOwner("landform-cli")); err != nil {
		if apierrors.IsConflict(err) {
			return result(fmt.Errorf("the lock changed while it was being released (another run took or released it): run %s again", a.cmdName("unlock "+obj.Name)))
		}
		return s.explain(err, "update", resLeases, "Lease", obj.Namespace, leaseName)
	}
	res.Released = true
	fmt.Fprintf(w, "Released lock %s. The controller runs again at its next retry (%s runs it now).\n", info.ID, a.cmdName("reconcile "+obj.Name))
	return result(nil)
}
