package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/statehistory"
	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/unsavedstate"
)

// StateRestoredReason is the reason of the event a restore records on the
// object.
const StateRestoredReason = "StateRestored"

func (a *app) stateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Work with the state of a Terraform object: its kept versions, a state an apply could not save",
		Long: "The controller keeps the state of each object as it is before every apply\n" +
			"and destroy (the last --state-history versions, 3 by default), in Secrets\n" +
			"tfhistory-<name>-<n> beside the state Secret, as encrypted as the state itself:\n" +
			"history lists them, restore writes one back. push writes a state an apply\n" +
			"could not save, when the controller cannot.",
	}
	cmd.AddCommand(a.stateHistoryCommand(), a.stateRestoreCommand(), a.statePushCommand())
	return cmd
}

// historyResult is one kept version as -o prints it.
type historyResult struct {
	Version  int       `json:"version"`
	Secret   string    `json:"secret"`
	Serial   *int64    `json:"serial,omitempty"`
	Lineage  string    `json:"lineage,omitempty"`
	KeptAt   time.Time `json:"keptAt"`
	Before   string    `json:"before,omitempty"`
	Revision string    `json:"revision,omitempty"`
}

func (a *app) stateHistoryCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:               "history NAME",
		Short:             "List the kept versions of the object's state, newest first",
		Args:              a.oneName("state history NAME"),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, obj, err := a.object(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			versions, err := statehistory.List(cmd.Context(), s.c, obj)
			if err != nil {
				return s.explain(err, "list", "secrets", "Secret", obj.Namespace, "")
			}
			if output != "" {
				out := []historyResult{}
				for _, v := range versions {
					h := historyResult{Version: v.Index, Secret: v.Secret, Lineage: v.Lineage, KeptAt: v.KeptAt.UTC(), Before: v.Why, Revision: v.Revision}
					if v.Serial >= 0 {
						h.Serial = &v.Serial
					}
					out = append(out, h)
				}
				return printData(a.Streams.Out, output, out)
			}
			w := tabwriter.NewWriter(a.Streams.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "VERSION\tSERIAL\tLINEAGE\tKEPT\tBEFORE\tREVISION")
			for _, v := range versions {
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", v.Index, serial(v.Serial), orDash(v.Lineage), v.KeptAt.Format(time.RFC3339), orDash(v.Why), orDash(v.Revision))
			}
			if len(versions) == 0 {
				fmt.Fprintf(a.Streams.Out, "No kept versions of the state of %s/%s.\n", obj.Namespace, obj.Name)
				return nil
			}
			return w.Flush()
		},
	}
	a.outputFlag(cmd, &output, "print the kept versions as json or yaml (serial left out when the state is encrypted)")
	return cmd
}

func (a *app) stateRestoreCommand() *cobra.Command {
	var serialFlag int64
	var version int
	cmd := &cobra.Command{
		Use:   "restore NAME (--serial N | --version N)",
		Short: "Write a kept version back into the object's state",
		Long: "Write a kept version of the state back into the object's state Secret, under\n" +
			"the state's lock: refused while a run (or anyone's tofu) holds it. The state\n" +
			"it replaces is kept first, so a restore can be undone. The next plan starts\n" +
			"from the restored state; Landform asks for it at once. An event on the object\n" +
			"records who restored which version.",
		Args:              a.oneName("state restore NAME"),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			if (serialFlag < 0) == (version <= 0) {
				return errors.New("give one of --serial N or --version N (see `state history`)")
			}
			return a.runRestore(cmd.Context(), args[0], serialFlag, version)
		},
	}
	cmd.Flags().Int64Var(&serialFlag, "serial", -1, "the state serial to restore (state history lists them)")
	cmd.Flags().IntVar(&version, "version", 0, "the kept version to restore (for an encrypted state, whose serial is unknown)")
	return cmd
}

func (a *app) runRestore(ctx context.Context, name string, wantSerial int64, wantVersion int) error {
	s, obj, err := a.object(ctx, name)
	if err != nil {
		return err
	}
	if b := obj.Spec.BackendConfig; b != nil && b.CustomConfiguration != "" {
		return fmt.Errorf("Terraform %s/%s keeps its state in a custom backend: restore it with that backend's own tools", obj.Namespace, obj.Name)
	}
	if obj.Status.Run != nil {
		return fmt.Errorf("a %s run (%s) of %s/%s is in flight: restore once it ended (or suspend the object first)", obj.Status.Run.Action, obj.Status.Run.ID, obj.Namespace, obj.Name)
	}
	// The controller writes a kept unsaved state into the backend before
	// the next run: over a restored state, it would undo the restore.
	unsaved, err := unsavedstate.Store{Client: s.c}.Stat(ctx, obj)
	if err != nil {
		return s.explain(err, "get", "secrets", "Secret", obj.Namespace, unsavedstate.SecretName(obj))
	}
	if unsaved != nil {
		return fmt.Errorf("%s/%s keeps a state that run %s could not save (%s, Secret %s), which Landform writes into the backend before the next run, over a restored one: nothing restored; "+
			"first `%s` (writes it, then restore), or delete Secret %s/%s to discard it",
			obj.Namespace, obj.Name, orDash(unsaved.Run), unsaved.Identity, unsavedstate.SecretName(obj), a.cmdName("state push "+name), obj.Namespace, unsavedstate.SecretName(obj))
	}
	versions, err := statehistory.List(ctx, s.c, obj)
	if err != nil {
		return s.explain(err, "list", "secrets", "Secret", obj.Namespace, "")
	}
	var chosen *statehistory.Version
	for i, v := range versions {
		if wantVersion > 0 && v.Index == wantVersion || wantVersion <= 0 && v.Serial == wantSerial {
			chosen = &versions[i]
			break
		}
	}
	if chosen == nil {
		return fmt.Errorf("no kept version of the state of %s/%s with %s: `%s` lists them", obj.Namespace, obj.Name, wanted(wantSerial, wantVersion), a.cmdName("state history "+name))
	}
	kube, err := kubernetes.NewForConfig(s.cfg)
	if err != nil {
		return err
	}
	who := whoAmI(ctx, kube)
	// Pruned to the controller's depth, recorded on the versions it kept.
	store := statehistory.Store{Client: s.c, Limit: statehistory.RecordedLimit(versions)}
	if _, err := store.Restore(ctx, kube.CoordinationV1().Leases(obj.Namespace), obj, *chosen, who); err != nil {
		var locked *statelock.LockedError
		if errors.As(err, &locked) {
			return fmt.Errorf("the state of %s/%s is locked by %s (lock %s): nothing restored; wait for the run to end, or see `%s`",
				obj.Namespace, obj.Name, orDash(locked.Info.Who), locked.Info.ID, a.cmdName("unlock "+name))
		}
		return err
	}
	msg := fmt.Sprintf("state restored to version %d (serial %s, kept %s before %s) by %s", chosen.Index, serial(chosen.Serial), chosen.KeptAt.Format(time.RFC3339), orDash(chosen.Why), who)
	if err := s.recordEvent(ctx, obj, StateRestoredReason, msg); err != nil {
		fmt.Fprintf(a.Streams.ErrOut, "warning: the state was restored, but the event could not be recorded: %v\n", err)
	}
	if err := s.annotate(ctx, obj, "reconcile.fluxcd.io/requestedAt", time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		return err
	}
	fmt.Fprintf(a.Streams.Out, "Terraform %s/%s: %s. The next plan starts from it.\n", obj.Namespace, obj.Name, msg)
	return nil
}

// whoAmI names the kubeconfig's user as the API server knows it.
func whoAmI(ctx context.Context, kube kubernetes.Interface) string {
	r, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || r.Status.UserInfo.Username == "" {
		return "an unknown user"
	}
	return r.Status.UserInfo.Username
}

// recordEvent records a Normal event on obj, as the CLI.
func (s *session) recordEvent(ctx context.Context, obj *v1alpha1.Terraform, reason, msg string) error {
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, GenerateName: obj.Name + "."},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.TerraformKind,
			Namespace: obj.Namespace, Name: obj.Name, UID: obj.UID, ResourceVersion: obj.ResourceVersion,
		},
		Reason: reason, Message: msg, Type: corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: "landform-cli"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	return s.explain(s.c.Create(ctx, ev), "create", "events", "Event", obj.Namespace, "")
}

func serial(s int64) string {
	if s < 0 {
		return "-"
	}
	return strconv.FormatInt(s, 10)
}

func wanted(s int64, v int) string {
	if v > 0 {
		return "version " + strconv.Itoa(v)
	}
	return "serial " + strconv.FormatInt(s, 10)
}
