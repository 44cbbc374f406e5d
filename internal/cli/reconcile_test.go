package cli

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/google/go-cmp/cmp"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

func TestReplan(t *testing.T) {
	ns := namespace(t, "replan")
	for _, tt := range []struct {
		name      string
		state     func(*v1alpha1.Terraform)
		requested bool
	}{
		{objReady, states[objReady], true},
		{objPending, states[objPending], true},
		{"no-drift-detection", func(obj *v1alpha1.Terraform) { obj.Spec.DisableDriftDetection = true; applied(obj) }, true},
		{objSuspended, states[objSuspended], false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := terraform(t, ns, tt.name, tt.state)
			before := snapshot(t, obj)
			r := run(t, "", "replan", "-n", ns, tt.name)
			golden(t, "replan/"+tt.name, r.transcript())
			after := snapshot(t, obj)
			requested, _, _ := unstructured.NestedString(after, "metadata", "annotations", meta.ReconcileRequestAnnotation)
			if (requested != "") != tt.requested {
				t.Errorf("requestedAt = %q", requested)
			}
			if tt.requested {
				if _, err := time.Parse(time.RFC3339Nano, requested); err != nil {
					t.Errorf("requestedAt %q: %v", requested, err)
				}
			}
			onlyAnnotationChanged(t, before, after, meta.ReconcileRequestAnnotation, "")
		})
	}
}

// step is one status the test writes as the controller, then the output
// it waits for before the next one ("" for the last).
type step struct {
	set  func(*v1alpha1.Terraform)
	then string
}

// Statuses the controller writes while it reconciles.
var (
	// planning: the request is handled and a plan run started.
	planning = func(obj *v1alpha1.Terraform) {
		obj.Status.Run = &v1alpha1.RunStatus{ID: "run-plan-2", Action: "plan", Revision: rev2}
		setCondition(obj, condition(meta.ReconcilingCondition, metav1.ConditionTrue, v1alpha1.RunInProgressReason, "running plan for revision "+rev2, 0))
		setCondition(obj, condition(meta.ReadyCondition, metav1.ConditionUnknown, v1alpha1.RunInProgressReason, "running plan for revision "+rev2, 0))
	}
	// appliedRev2: Ready once rev2's plan is applied.
	appliedRev2 = func(obj *v1alpha1.Terraform) {
		obj.Status.ObservedGeneration = obj.Generation
		obj.Status.Run = nil
		obj.Status.LastAppliedRevision = rev2
		obj.Status.Plan = &v1alpha1.PlanStatus{ID: pendingPlan, Revision: rev2, Add: 2, Change: 1, Destroy: 2, PlannedAt: ago(0)}
		obj.Status.LastAppliedPlan = pendingPlan
		apimeta.RemoveStatusCondition(&obj.Status.Conditions, meta.ReconcilingCondition)
		setCondition(obj, condition(meta.ReadyCondition, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, "applied revision "+rev2, 0))
	}
	// applying: the plan made was approved automatically; its apply runs.
	applying = func(obj *v1alpha1.Terraform) {
		pending(obj)
		obj.Status.Run = &v1alpha1.RunStatus{ID: "run-apply-2", Action: runApply, Plan: pendingPlan, Revision: rev2}
		setCondition(obj, condition(meta.ReconcilingCondition, metav1.ConditionTrue, v1alpha1.RunInProgressReason, "running apply of plan "+pendingPlan, 0))
		setCondition(obj, condition(meta.ReadyCondition, metav1.ConditionUnknown, v1alpha1.RunInProgressReason, "running apply of plan "+pendingPlan, 0))
	}
	// planPending: the plan made waits for approval.
	planPending = func(obj *v1alpha1.Terraform) {
		obj.Status.ObservedGeneration = obj.Generation
		obj.Status.Run = nil
		apimeta.RemoveStatusCondition(&obj.Status.Conditions, meta.ReconcilingCondition)
		pending(obj)
	}
)

// TestReconcileWait plays the controller while `reconcile` follows.
func TestReconcileWait(t *testing.T) {
	ns := namespace(t, "reconcile")
	for _, tt := range []struct {
		name  string
		flags []string
		state func(*v1alpha1.Terraform)
		// steps follow the first status, which handles the request and starts a plan.
		steps []step
		code  int
	}{
		{name: "ready", state: states[objReady], steps: []step{{set: appliedRev2}}},
		{name: "ready-json", flags: []string{"-o", "json"}, state: states[objReady], steps: []step{{set: appliedRev2}}},
		{name: "failed", flags: []string{"--wait"}, state: states[objReady], code: ExitError, steps: []step{{set: func(obj *v1alpha1.Terraform) {
			obj.Status.Run = nil
			setCondition(obj, condition(meta.ReadyCondition, metav1.ConditionFalse, v1alpha1.PlanFailedReason, "terraform plan failed:\nError: Invalid reference", 0))
			setCondition(obj, condition(meta.ReconcilingCondition, metav1.ConditionTrue, progressingWithRetry, "retrying after: PlanFailed", 0))
		}}}},
		{name: "stalled", state: states[objReady], code: ExitError, steps: []step{{set: func(obj *v1alpha1.Terraform) {
			obj.Status.Run = nil
			apimeta.RemoveStatusCondition(&obj.Status.Conditions, meta.ReconcilingCondition)
			setCondition(obj, condition(meta.StalledCondition, metav1.ConditionTrue, v1alpha1.InvalidConfigurationReason, "the module does not validate: Error: Unsupported argument", 0))
			setCondition(obj, condition(meta.ReadyCondition, metav1.ConditionFalse, v1alpha1.InvalidConfigurationReason, "the module does not validate: Error: Unsupported argument", 0))
		}}}},
		// Waiting for a dependency, then a locked state, is not a failure.
		{name: "transient", state: states[objReady], steps: []step{
			{set: func(obj *v1alpha1.Terraform) {
				obj.Status.Run = nil
				apimeta.RemoveStatusCondition(&obj.Status.Conditions, meta.ReconcilingCondition)
				setCondition(obj, condition(meta.ReadyCondition, metav1.ConditionFalse, v1alpha1.DependencyNotReadyReason, "waiting for Terraform reconcile/network (not ready)", 0))
			}, then: "◎ waiting for Terraform reconcile/network"},
			{set: func(obj *v1alpha1.Terraform) {
				setCondition(obj, condition(meta.ReadyCondition, metav1.ConditionFalse, v1alpha1.StateLockedReason, "the state is locked by root@laptop (lock 6c1f0b7e)", 0))
				setCondition(obj, condition(meta.ReconcilingCondition, metav1.ConditionTrue, progressingWithRetry, "retrying after: StateLocked", 0))
			}, then: "◎ the state is locked"},
			{set: appliedRev2},
		}},
		// A plan waiting for approval is waited through until it is applied.
		{name: "pending-approved", state: states[objPending], steps: []step{
			{set: planPending, then: "◎ plan " + pendingPlan + " (+2 ~1 -2) waits for approval"},
			{set: applying, then: "◎ running apply"},
			{set: appliedRev2},
		}},
		{name: "pending-planned", flags: []string{"--until=planned"}, state: states[objPending], code: ExitPending, steps: []step{{set: planPending}}},
		{name: "pending-planned-yaml", flags: []string{"--until", "planned", "-o", "yaml"}, state: states[objPending], code: ExitPending, steps: []step{{set: planPending}}},
		// approvePlan auto: planned once the apply of the new plan starts.
		{name: "auto-planned", flags: []string{"--until=planned"}, state: states[objReady], code: ExitPending, steps: []step{{set: applying}}},
		{name: "no-changes-planned", flags: []string{"--until=planned"}, state: states[objReady], steps: []step{{set: func(obj *v1alpha1.Terraform) {
			obj.Status.Run = nil
			apimeta.RemoveStatusCondition(&obj.Status.Conditions, meta.ReconcilingCondition)
			setCondition(obj, condition(meta.ReadyCondition, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, "applied revision "+rev1, 0))
		}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := terraform(t, ns, tt.name, tt.state)
			cmd := start(t, append([]string{"reconcile", "-n", ns, tt.name}, tt.flags...)...)
			requested := waitRequested(t, obj)
			out := cmd.waitOutput
			if slices.Contains(tt.flags, "-o") { // progress goes to stderr
				out = cmd.waitErrOutput
			}
			out(t, func(s string) bool { return strings.Contains(s, "◎ waiting for the controller") })

			obj.Status.LastHandledReconcileAt = requested
			planning(obj)
			updateStatus(t, obj)
			out(t, func(s string) bool { return strings.Contains(s, "◎ running plan") })
			for _, st := range tt.steps {
				st.set(obj)
				updateStatus(t, obj)
				if st.then != "" {
					out(t, func(s string) bool { return strings.Contains(s, st.then) })
				}
			}
			r := cmd.result(t)
			golden(t, "reconcile/"+tt.name, normalize(r.transcript()))
			if got := ExitCode(r.err); got != tt.code {
				t.Errorf("exit code %d, want %d", got, tt.code)
			}
		})
	}

	t.Run("timeout", func(t *testing.T) {
		terraform(t, ns, "nobody-home", states[objReady])
		r := run(t, "", "reconcile", "-n", ns, "nobody-home", "--timeout", "300ms")
		golden(t, "reconcile/timeout", r.transcript())
	})
	t.Run("no-wait", func(t *testing.T) {
		obj := terraform(t, ns, "no-wait", states[objReady])
		r := run(t, "", "reconcile", "-n", ns, "no-wait", "--wait=false")
		golden(t, "reconcile/no-wait", r.transcript())
		waitRequested(t, obj)
	})
	t.Run("suspended", func(t *testing.T) {
		terraform(t, ns, objSuspended, states[objSuspended])
		golden(t, "reconcile/suspended", run(t, "", "reconcile", "-n", ns, objSuspended).transcript())
	})
	t.Run("bad-until", func(t *testing.T) {
		golden(t, "reconcile/bad-until", run(t, "", "reconcile", "-n", ns, objSuspended, "--until", "applied").transcript())
	})
}

// TestReconcileWithSource plays source-controller, then the controller.
func TestReconcileWithSource(t *testing.T) {
	ns := namespace(t, "reconcile-source")
	ctx := context.Background()
	repo := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "infra"},
		Spec:       sourcev1.GitRepositorySpec{URL: "https://example.invalid/infra.git", Interval: metav1.Duration{Duration: time.Hour}},
	}
	if err := env.Client.Create(ctx, repo); err != nil {
		t.Fatal(err)
	}
	obj := terraform(t, ns, "database", states[objReady])

	cmd := start(t, "reconcile", "-n", ns, "database", "--with-source")
	requested := waitSourceRequested(t, repo)
	cmd.waitOutput(t, func(s string) bool { return strings.Contains(s, "◎ waiting for source-controller") })
	repo.Status.LastHandledReconcileAt = requested
	repo.Status.ObservedGeneration = repo.Generation
	conditions.MarkReconciling(repo, meta.ProgressingReason, "building artifact: new upstream revision '%s'", rev2)
	conditions.MarkUnknown(repo, meta.ReadyCondition, meta.ProgressingReason, "building artifact: new upstream revision '%s'", rev2)
	updateSource(t, repo)
	cmd.waitOutput(t, func(s string) bool { return strings.Contains(s, "◎ building artifact") })
	repo.Status.Artifact = &meta.Artifact{Path: "infra.tar.gz", URL: "http://example.invalid/infra.tar.gz", Revision: rev2, Digest: "sha256:0000", LastUpdateTime: metav1.Now()}
	conditions.Delete(repo, meta.ReconcilingCondition)
	conditions.MarkTrue(repo, meta.ReadyCondition, meta.SucceededReason, "stored artifact for revision '%s'", rev2)
	updateSource(t, repo)

	tfRequested := waitRequested(t, obj)
	cmd.waitOutput(t, func(s string) bool {
		return strings.Contains(s, "► requested reconciliation of reconcile-source/database\n◎ waiting for the controller")
	})
	obj.Status.LastHandledReconcileAt = tfRequested
	appliedRev2(obj)
	updateStatus(t, obj)
	golden(t, "reconcile/with-source", cmd.result(t).transcript())

	t.Run("source-failed", func(t *testing.T) {
		cmd := start(t, "reconcile", "-n", ns, "database", "--with-source")
		requested := waitSourceRequested(t, repo)
		cmd.waitOutput(t, func(s string) bool { return strings.Contains(s, "◎ waiting for source-controller") })
		repo.Status.LastHandledReconcileAt = requested
		conditions.MarkFalse(repo, meta.ReadyCondition, sourcev1.GitOperationFailedReason, "failed to checkout and determine revision: unable to clone: authentication required")
		updateSource(t, repo)
		r := cmd.result(t)
		golden(t, "reconcile/source-failed", r.transcript())
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		if obj.GetAnnotations()[meta.ReconcileRequestAnnotation] != tfRequested {
			t.Error("the Terraform object was asked to reconcile although its source failed")
		}
	})
}

// waitSourceRequested waits for a reconcile request on repo newer than
// the one it handled last, and returns it.
func waitSourceRequested(t *testing.T, repo *sourcev1.GitRepository) string {
	t.Helper()
	return waitRequest(t, repo, func() string { return repo.Status.LastHandledReconcileAt }, "no reconcile request on the source")
}

func updateSource(t *testing.T, repo *sourcev1.GitRepository) {
	t.Helper()
	if err := env.Client.Status().Update(context.Background(), repo); err != nil {
		t.Fatal(err)
	}
}

// waitRequested waits for the CLI's request and returns its value.
func waitRequested(t *testing.T, obj *v1alpha1.Terraform) string {
	t.Helper()
	return waitRequest(t, obj, func() string { return obj.Status.LastHandledReconcileAt }, "no reconcile request")
}

// waitRequest waits for a reconcile request on obj newer than the one it
// handled last (handled reads it from obj as last fetched), and returns
// it; the test fails with none as its message after 30 s.
func waitRequest(t *testing.T, obj client.Object, handled func() string, none string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		if v := obj.GetAnnotations()[meta.ReconcileRequestAnnotation]; v != "" && v != handled() {
			return v
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal(none)
	return ""
}

func updateStatus(t *testing.T, obj *v1alpha1.Terraform) {
	t.Helper()
	for i := range obj.Status.Conditions {
		obj.Status.Conditions[i].ObservedGeneration = obj.Generation
	}
	if err := env.Client.Status().Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

func TestSuspendResume(t *testing.T) {
	ns := namespace(t, "suspend")
	obj := terraform(t, ns, "database", states[objReady])
	suspended := func() bool {
		t.Helper()
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		return obj.Spec.Suspend
	}
	before := snapshot(t, obj)
	for i, step := range []struct {
		args []string
		want bool
	}{
		{[]string{"suspend", "-n", ns, "database"}, true},
		{[]string{"suspend", "-n", ns, "database"}, true},
		{[]string{"resume", "-n", ns, "database", "--wait=false"}, false},
		{[]string{"resume", "-n", ns, "database"}, false},
	} {
		r := run(t, "", step.args...)
		golden(t, "suspend/step"+string(rune('1'+i)), r.transcript())
		if got := suspended(); got != step.want {
			t.Errorf("after %v: suspend = %v, want %v", step.args, got, step.want)
		}
	}
	// Suspending and resuming leave the object as it was, but for its
	// generation and the reconcile resume requested.
	after := snapshot(t, obj)
	unstructured.RemoveNestedField(before, "metadata", "generation")
	unstructured.RemoveNestedField(after, "metadata", "generation")
	onlyAnnotationChanged(t, before, after, meta.ReconcileRequestAnnotation, "")
}

// TestSuspendResumeMany suspends and resumes several objects, and every
// object of a namespace, then follows the resumed ones as the controller
// reconciles them.
func TestSuspendResumeMany(t *testing.T) {
	ns := namespace(t, "suspend-many")
	objs := map[string]*v1alpha1.Terraform{}
	for _, name := range []string{"cache", "database", "network"} {
		objs[name] = terraform(t, ns, name, states[objReady])
	}
	isSuspended := func(name string) bool {
		t.Helper()
		obj := objs[name]
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		return obj.Spec.Suspend
	}

	r := run(t, "", "suspend", "-n", ns, "database", "missing", "network", "database")
	golden(t, "suspend/many", r.transcript())
	for name, want := range map[string]bool{"cache": false, "database": true, "network": true} {
		if got := isSuspended(name); got != want {
			t.Errorf("after suspend: %s suspended = %v, want %v", name, got, want)
		}
	}
	golden(t, "suspend/all", run(t, "", "suspend", "-n", ns, "--all").transcript())
	for name := range objs {
		if !isSuspended(name) {
			t.Errorf("after suspend --all: %s is not suspended", name)
		}
	}
	golden(t, "suspend/names-and-all", run(t, "", "suspend", "-n", ns, "--all", "cache").transcript())
	golden(t, "suspend/no-names", run(t, "", "resume", "-n", ns).transcript())

	// resume --all: cache becomes Ready, database waits for approval (and
	// times out), network fails.
	cmd := start(t, "resume", "-n", ns, "--all", "--timeout", "5s")
	outcome := map[string]func(*v1alpha1.Terraform){
		"cache":    appliedRev2,
		"database": planPending,
		"network": func(obj *v1alpha1.Terraform) {
			obj.Status.Run = nil
			setCondition(obj, condition(meta.ReadyCondition, metav1.ConditionFalse, v1alpha1.PlanFailedReason, "terraform plan failed", 0))
			setCondition(obj, condition(meta.ReconcilingCondition, metav1.ConditionTrue, progressingWithRetry, "retrying after: PlanFailed", 0))
		},
	}
	// Objects are followed in turn: database and network are reconciled
	// before cache, which is followed first, so that each prints the same
	// lines whenever the command looks.
	requested := map[string]string{}
	for name, obj := range objs {
		requested[name] = waitRequested(t, obj)
	}
	cmd.waitOutput(t, func(s string) bool { return strings.Contains(s, "cache: ◎ waiting for the controller") })
	for _, name := range []string{"database", "network", "cache"} {
		obj := objs[name]
		obj.Status.LastHandledReconcileAt = requested[name]
		outcome[name](obj)
		updateStatus(t, obj)
	}
	r = cmd.result(t)
	golden(t, "suspend/resume-all", r.transcript())
	if got := ExitCode(r.err); got != ExitError {
		t.Errorf("exit code %d, want %d", got, ExitError)
	}
	for name := range objs {
		if isSuspended(name) {
			t.Errorf("after resume --all: %s is still suspended", name)
		}
	}
}

// TestResumeOutput resumes several objects with -o: one result per object
// named and found, in order, each as reconcile -o prints it; progress on
// stderr; the exit code the worst.
func TestResumeOutput(t *testing.T) {
	ns := namespace(t, "resume-output")
	objs := map[string]*v1alpha1.Terraform{}
	for _, name := range []string{"cache", "database"} {
		objs[name] = terraform(t, ns, name, states[objSuspended])
	}
	terraform(t, ns, objReady, states[objReady])

	cmd := start(t, "resume", "-n", ns, "cache", "database", objReady, "missing", "-o", "json")
	requested := map[string]string{}
	for name, obj := range objs {
		requested[name] = waitRequested(t, obj)
	}
	cmd.waitErrOutput(t, func(s string) bool { return strings.Contains(s, "cache: ◎ waiting for the controller") })
	// database ends before cache is followed, as in TestSuspendResumeMany.
	for name, set := range map[string]func(*v1alpha1.Terraform){
		"database": func(obj *v1alpha1.Terraform) {
			setCondition(obj, condition(meta.ReadyCondition, metav1.ConditionFalse, v1alpha1.PlanFailedReason, "terraform plan failed", 0))
		},
		"cache": appliedRev2,
	} {
		obj := objs[name]
		obj.Status.LastHandledReconcileAt = requested[name]
		set(obj)
		updateStatus(t, obj)
	}
	r := cmd.result(t)
	golden(t, "suspend/resume-json", normalize(r.transcript()))
	if got := ExitCode(r.err); got != ExitError {
		t.Errorf("exit code %d, want %d", got, ExitError)
	}
	var results []reconcileResult
	if err := json.Unmarshal([]byte(r.stdout), &results); err != nil {
		t.Fatalf("stdout is not a JSON list of results: %v\n%s", err, r.stdout)
	}
	type outcome struct {
		Name        string
		Result      verdict
		ExitCode    int
		RequestedAt string
	}
	var got []outcome
	for _, res := range results {
		got = append(got, outcome{res.Name, res.Result, res.ExitCode, res.RequestedAt})
	}
	want := []outcome{
		{"cache", verdictReady, ExitOK, requested["cache"]},
		{"database", verdictFailed, ExitError, requested["database"]},
		{objReady, verdictNotSuspended, ExitOK, ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}

	t.Run("no-wait-yaml", func(t *testing.T) {
		obj := terraform(t, ns, "network", states[objSuspended])
		r := run(t, "", "resume", "-n", ns, "network", "--wait=false", "-o", "yaml")
		golden(t, "suspend/resume-no-wait-yaml", normalize(r.transcript()))
		var results []reconcileResult
		if err := yaml.Unmarshal([]byte(r.stdout), &results); err != nil {
			t.Fatal(err)
		}
		if len(results) != 1 || results[0].Result != verdictRequested || results[0].RequestedAt != waitRequested(t, obj) {
			t.Errorf("results = %+v, want network requested with the annotation's value", results)
		}
	})
	t.Run("bad-output", func(t *testing.T) {
		golden(t, "suspend/resume-bad-output", run(t, "", "resume", "-n", ns, "cache", "-o", "table").transcript())
	})
}
