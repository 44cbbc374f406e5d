package cli

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/statehistory"
	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/testenv"
	"github.com/landform-dev/landform/internal/unsavedstate"
)

// historyLineage is the lineage of the states TestStateHistoryAndRestore
// keeps.
const historyLineage = "4d1b5e0c-7a63-1b2e-9f3c-8e5d6a7b8c9d"

func stateAt(serial int) map[string][]byte { return testenv.StateData(historyLineage, serial) }

// keptBefore is why and at which revision the version of serial was kept:
// before the apply of plan-<serial…>-a<serial>… of main@sha1:<serial…>.
func keptBefore(serial int) (why, revision string) {
	d := strconv.Itoa(serial)
	return "apply of plan plan-" + strings.Repeat(d, 10) + "-" + strings.Repeat("a"+d, 5), "main@sha1:" + strings.Repeat(d, 40)
}

// Three applies kept three versions: `state history` lists their serials,
// `state restore` is refused while a run holds the lock and then brings
// the chosen one back, byte for byte, with an event naming who did it.
func TestStateHistoryAndRestore(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "state")
	obj := terraform(t, ns, "db", func(obj *v1alpha1.Terraform) { obj.Spec.ApprovePlan = v1alpha1.ApprovePlanAuto })
	state := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.StateSecret(obj)}, Data: stateAt(1)}
	g.Expect(env.Client.Create(ctx, state)).To(Succeed())
	store := statehistory.Store{Client: env.Client}
	for serial := 1; serial <= 3; serial++ {
		state.Data = stateAt(serial)
		g.Expect(env.Client.Update(ctx, state)).To(Succeed())
		why, revision := keptBefore(serial)
		_, err := store.Keep(ctx, obj, why, revision)
		g.Expect(err).NotTo(HaveOccurred())
	}
	state.Data = stateAt(4)
	g.Expect(env.Client.Update(ctx, state)).To(Succeed())

	r := run(t, "", "state", "history", "-n", ns, "db")
	g.Expect(r.err).NotTo(HaveOccurred(), r.transcript())
	golden(t, "state/history", normalize(r.transcript()))
	r = run(t, "", "state", "history", "-n", ns, "db", "-o", "json")
	g.Expect(r.err).NotTo(HaveOccurred(), r.transcript())
	var kept []historyResult
	g.Expect(json.Unmarshal([]byte(r.stdout), &kept)).To(Succeed(), r.stdout)
	g.Expect(kept).To(HaveLen(3))
	g.Expect(kept[0].Version).To(Equal(3))
	g.Expect(*kept[0].Serial).To(Equal(int64(3)))
	why, revision := keptBefore(3)
	g.Expect(kept[0].Lineage).To(Equal(historyLineage))
	g.Expect(kept[0].Before).To(Equal(why))
	g.Expect(kept[0].Revision).To(Equal(revision))

	leases := kubernetes.NewForConfigOrDie(env.Config).CoordinationV1().Leases(ns)
	lease := names.StateLease(obj)
	id, err := statelock.Acquire(ctx, leases, lease, statelock.Holder{Run: "run-1"}, "OperationTypeApply")
	g.Expect(err).NotTo(HaveOccurred())
	r = run(t, "", "state", "restore", "-n", ns, "db", "--serial", "2")
	g.Expect(r.err).To(MatchError(ContainSubstring("is locked by landform-runner run run-1")), r.transcript())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(state), state)).To(Succeed())
	g.Expect(state.Data).To(Equal(stateAt(4)), "nothing restored while locked")
	g.Expect(statelock.Release(ctx, leases, lease, id)).To(Succeed())

	// A state an apply could not save is kept: the controller would
	// write it over the restored one.
	d, err := (unsavedstate.Store{Client: env.Client}).Keep(ctx, obj, "run-unsaved", []byte(`{"version":4,"serial":9,"lineage":"lin"}`), now)
	g.Expect(err).NotTo(HaveOccurred())
	r = run(t, "", "state", "restore", "-n", ns, "db", "--serial", "2")
	g.Expect(r.err).To(MatchError(And(ContainSubstring("run run-unsaved could not save"), ContainSubstring("landform state push db"),
		ContainSubstring("delete Secret "+ns+"/tfunsaved-db-0"))), r.transcript())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(state), state)).To(Succeed())
	g.Expect(state.Data).To(Equal(stateAt(4)), "nothing restored while an unsaved state waits")
	g.Expect((unsavedstate.Store{Client: env.Client}).Forget(ctx, obj, d)).To(Succeed())

	r = run(t, "", "state", "restore", "-n", ns, "db", "--serial", "7")
	g.Expect(r.err).To(MatchError(ContainSubstring("no kept version")), r.transcript())

	r = run(t, "", "state", "restore", "-n", ns, "db", "--serial", "2")
	g.Expect(r.err).NotTo(HaveOccurred(), r.transcript())
	golden(t, "state/restore", normalize(r.transcript()))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(state), state)).To(Succeed())
	g.Expect(state.Data).To(Equal(stateAt(2)), "serial 2 is back")

	versions, err := statehistory.List(ctx, env.Client, obj)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(versions[0].Serial).To(BeEquivalentTo(4), "the replaced state was kept: the restore can be undone")

	var events corev1.EventList
	g.Expect(env.Client.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
	var restored []string
	for _, e := range events.Items {
		if e.Reason == StateRestoredReason && e.InvolvedObject.Name == "db" {
			restored = append(restored, e.Message)
		}
	}
	g.Expect(restored).To(ConsistOf(ContainSubstring("state restored to version 2")), "who and when are recorded")
	g.Expect(restored[0]).NotTo(ContainSubstring("unknown user"), "the API server named the user")
	after := &v1alpha1.Terraform{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), after)).To(Succeed())
	g.Expect(after.Annotations).To(HaveKey("reconcile.fluxcd.io/requestedAt"), "a plan from the restored state is asked for")
}
