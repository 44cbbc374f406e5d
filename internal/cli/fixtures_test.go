package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/planstore"
)

const (
	rev1 = "main@sha1:1111111111aaaaaaaaaabbbbbbbbbbcccccccccc"
	rev2 = "main@sha1:2222222222ddddddddddeeeeeeeeeeffffffffff"
	// The ids the fixtures' plans have.
	appliedPlan = "plan-1111111111-a1a1a1a1a1"
	pendingPlan = "plan-2222222222-b2b2b2b2b2"
)

// The objects of the fixture, each in one state a command must handle.
const (
	objReady     = "ready"     // applied, auto-approved, outputs written
	objPending   = "pending"   // a plan waits for approval
	objFailed    = "failed"    // planning failed; retried
	objRunning   = "running"   // a plan is running
	objSuspended = "suspended" // suspended after being applied
	objLocked    = "locked"    // a run found the state locked
	objNew       = "new"       // never reconciled
)

// fixtureStates creates one object per state in ns, labelled set=label.
func fixtureStates(t *testing.T, ns, label string) map[string]*v1alpha1.Terraform {
	t.Helper()
	labelled := func(set func(*v1alpha1.Terraform)) func(*v1alpha1.Terraform) {
		return func(obj *v1alpha1.Terraform) {
			obj.Labels = map[string]string{"set": label}
			set(obj)
		}
	}
	objs := map[string]*v1alpha1.Terraform{}
	for _, name := range []string{objReady, objPending, objFailed, objRunning, objSuspended, objLocked, objNew} {
		objs[name] = terraform(t, ns, name, labelled(states[name]))
	}
	return objs
}

var states = map[string]func(*v1alpha1.Terraform){
	objReady: func(obj *v1alpha1.Terraform) {
		obj.Spec.ApprovePlan = v1alpha1.ApprovePlanAuto
		obj.Spec.WriteOutputsToSecret = &v1alpha1.WriteOutputsToSecretSpec{Name: obj.Name + "-outputs"}
		applied(obj)
	},
	objPending: func(obj *v1alpha1.Terraform) {
		obj.Spec.WriteOutputsToSecret = &v1alpha1.WriteOutputsToSecretSpec{Name: obj.Name + "-outputs", Outputs: []string{"dsn", "security_group_id:sg"}}
		applied(obj)
		pending(obj)
	},
	objFailed: func(obj *v1alpha1.Terraform) {
		st := &obj.Status
		st.LastAttemptedRevision = rev2
		setCondition(obj, condition(meta.ReadyCondition, metav1.ConditionFalse, v1alpha1.PlanFailedReason,
			"terraform plan failed:\nError: Invalid reference\n  on main.tf line 3", 3*time.Minute))
		setCondition(obj, condition(meta.ReconcilingCondition, metav1.ConditionTrue, progressingWithRetry, "retrying after: PlanFailed", 3*time.Minute))
	},
	objRunning: func(obj *v1alpha1.Terraform) {
		obj.Status.LastAttemptedRevision = rev2
		started := metav1.NewTime(now.Add(-time.Minute))
		obj.Status.Run = &v1alpha1.RunStatus{ID: "run-0123456789abcdef", Action: "plan", Runner: "Pod default/running-runner-x7k2p", Started: &started, Revision: rev2}
		setCondition(obj, condition(meta.ReadyCondition, metav1.ConditionUnknown, v1alpha1.RunInProgressReason, "plan run run-0123456789abcdef in progress on Pod default/running-runner-x7k2p (revision "+rev2+")", time.Minute))
		setCondition(obj, condition(meta.ReconcilingCondition, metav1.ConditionTrue, v1alpha1.RunInProgressReason, "plan run run-0123456789abcdef in progress on Pod default/running-runner-x7k2p (revision "+rev2+")", time.Minute))
	},
	objSuspended: func(obj *v1alpha1.Terraform) {
		obj.Spec.Suspend = true
		applied(obj)
	},
	objLocked: func(obj *v1alpha1.Terraform) {
		applied(obj)
		obj.Status.Lock = &v1alpha1.LockStatus{ID: "6c1f0b7e-0d3a-4b8e-9c1a-2f4e5d6c7b8a", Holder: "root@laptop", Since: ago(7 * time.Minute)}
		setCondition(obj, condition(v1alpha1.StateLockedCondition, metav1.ConditionTrue, v1alpha1.StateLockedReason, "state locked by root@laptop (lock 6c1f0b7e-0d3a-4b8e-9c1a-2f4e5d6c7b8a)", 7*time.Minute))
		setCondition(obj, condition(meta.ReadyCondition, metav1.ConditionFalse, v1alpha1.StateLockedReason,
			"the state is locked by root@laptop (lock 6c1f0b7e-0d3a-4b8e-9c1a-2f4e5d6c7b8a, OperationTypeApply since unknown); Landform retries until the holder releases it", 7*time.Minute))
	},
	objNew: func(*v1alpha1.Terraform) {},
}

// applied is the status after plan appliedPlan of rev1 was applied.
func applied(obj *v1alpha1.Terraform) {
	st := &obj.Status
	st.LastAttemptedRevision, st.LastPlannedRevision, st.LastAppliedRevision = rev1, rev1, rev1
	st.LastAppliedPlan = appliedPlan
	st.Plan = &v1alpha1.PlanStatus{ID: appliedPlan, Revision: rev1, Add: 3, PlannedAt: ago(50 * time.Minute),
		Resources: []string{"terraform_data.database", "terraform_data.old", "terraform_data.security_group"}}
	st.AvailableOutputs = []string{"dsn", "security_group_id"}
	setCondition(obj, condition(meta.ReadyCondition, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, "applied revision "+rev1, 49*time.Minute))
	setCondition(obj, condition(v1alpha1.PlannedCondition, metav1.ConditionTrue, v1alpha1.PlannedWithChangesReason, "plan "+appliedPlan+" for revision "+rev1+": +3 ~0 -0", 50*time.Minute))
	setCondition(obj, condition(v1alpha1.AppliedCondition, metav1.ConditionTrue, v1alpha1.AppliedReason, "applied plan "+appliedPlan+" for revision "+rev1, 49*time.Minute))
	setCondition(obj, condition(v1alpha1.OutputsWrittenCondition, metav1.ConditionTrue, v1alpha1.OutputsWrittenReason, "wrote 2 outputs to Secret "+obj.Name+"-outputs", 49*time.Minute))
}

// pending is the status once plan pendingPlan of rev2 waits for approval:
// the plan of testdata/plan (+2 ~1 -2, one replace).
func pending(obj *v1alpha1.Terraform) {
	st := &obj.Status
	st.LastAttemptedRevision, st.LastPlannedRevision = rev2, rev2
	st.Plan = &v1alpha1.PlanStatus{Pending: pendingPlan, ID: pendingPlan, Revision: rev2, Add: 2, Change: 1, Destroy: 2, Replace: 1, PlannedAt: ago(5 * time.Minute),
		Resources:          []string{"terraform_data.cache", "terraform_data.database", "terraform_data.old", "terraform_data.security_group"},
		ResourcesToReplace: []string{"terraform_data.database"}, ResourcesToDestroy: []string{"terraform_data.old"}}
	setCondition(obj, condition(v1alpha1.PlannedCondition, metav1.ConditionTrue, v1alpha1.PlannedWithChangesReason, "plan "+pendingPlan+" for revision "+rev2+": +2 ~1 -2", 5*time.Minute))
	setCondition(obj, condition(meta.ReadyCondition, metav1.ConditionFalse, v1alpha1.PlanPendingReason,
		"plan "+pendingPlan+" (+2 ~1 -2) waits for approval: annotate with "+v1alpha1.ApproveAnnotation+"="+pendingPlan+" or set spec.approvePlan", 5*time.Minute))
}

// heldDestructive is pending under approvePlan auto: the controller holds
// the plan because it replaces and destroys resources.
func heldDestructive(obj *v1alpha1.Terraform) {
	obj.Spec.ApprovePlan = v1alpha1.ApprovePlanAuto
	applied(obj)
	pending(obj)
	setCondition(obj, condition(v1alpha1.PlannedCondition, metav1.ConditionTrue, v1alpha1.DestructivePlanPendingReason,
		"plan "+pendingPlan+" for revision "+rev2+": +2 ~1 -2; it replaces terraform_data.database and destroys terraform_data.old and waits for approval (approvePlan auto applies nothing destructive)", 5*time.Minute))
	setCondition(obj, condition(meta.ReadyCondition, metav1.ConditionFalse, v1alpha1.DestructivePlanPendingReason,
		"plan "+pendingPlan+" (+2 ~1 -2) replaces terraform_data.database and destroys terraform_data.old; approvePlan auto applies no such plan without a person, so it waits for approval: annotate with "+
			v1alpha1.ApproveAnnotation+"="+pendingPlan+" or set spec.approvePlan to its id (spec.autoApproveDestructive: true applies such plans automatically)", 5*time.Minute))
}

// fixturePlan reads testdata/plan: the JSON and human plans.
func fixturePlan(t testing.TB) (jsonPlan, humanPlan []byte) {
	t.Helper()
	return readFixturePlan(t, "plan")
}

// readFixturePlan reads the JSON and human plans name.json and name.txt of
// testdata/plan.
func readFixturePlan(t testing.TB, name string) (jsonPlan, humanPlan []byte) {
	t.Helper()
	var err error
	if jsonPlan, err = os.ReadFile(filepath.Join("testdata", "plan", name+".json")); err != nil {
		t.Fatal(err)
	}
	if humanPlan, err = os.ReadFile(filepath.Join("testdata", "plan", name+".txt")); err != nil {
		t.Fatal(err)
	}
	return jsonPlan, humanPlan
}

// storePlan stores the fixture plan as obj's plan id, as the controller does.
func storePlan(t testing.TB, obj *v1alpha1.Terraform, id, revision string, isApplied bool) {
	t.Helper()
	jsonPlan, humanPlan := fixturePlan(t)
	p := &planstore.Plan{ID: id, Revision: revision, InputsDigest: "inputs", PlanFile: []byte("binary plan"),
		JSONPlan: jsonPlan, HumanPlan: humanPlan, Applied: isApplied}
	if err := (planstore.Store{Client: env.Client}).Save(context.Background(), obj, p); err != nil {
		t.Fatal(err)
	}
}

// lines counts the lines of s.
func lines(s string) int { return strings.Count(s, "\n") }
