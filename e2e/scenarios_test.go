package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/testenv"
)

// fileVars are modules/file's variables. The file lands in the runner's
// workspace (an emptyDir of its Pod).
func fileVars(path, content string) []infrav1.Variable {
	return []infrav1.Variable{{Name: "path", Value: testenv.JSONValue(path)}, {Name: "content", Value: testenv.JSONValue(content)}}
}

// TestRunnerServiceAccountMayDoNothing: the installed runner RBAC, as the
// cluster's authorizer sees it: the runner Pods' ServiceAccount may do
// nothing (runners reach their state with the object's state identity).
func TestRunnerServiceAccountMayDoNothing(t *testing.T) {
	cl := connect(t)
	user := "system:serviceaccount:" + cl.ns + ":" + runnerSA
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + cl.ns, "system:authenticated"}
	for _, c := range []struct {
		ns, group, resource, verb string
		want                      bool
	}{
		// Runners reach their state with the object's state identity:
		// the Pod's own ServiceAccount is granted nothing.
		{cl.ns, "", "secrets", "get", false},
		{cl.ns, "", "secrets", "create", false},
		{cl.ns, "coordination.k8s.io", "leases", "update", false},
		{cl.controllerNS, "", "secrets", "get", false}, // the runner CA
		{"", "", "secrets", "list", false},
		{cl.ns, "", "pods", "create", false},
		{cl.ns, "", "configmaps", "get", false},
		{cl.ns, "infra.landform.dev", "terraforms", "get", false},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: c.ns, Group: c.group, Resource: c.resource, Verb: c.verb},
		}}
		if err := cl.client.Create(context.Background(), sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != c.want {
			t.Errorf("%s %s %s.%s in %q: allowed=%v, want %v", user, c.verb, c.resource, c.group, c.ns, sar.Status.Allowed, c.want)
		}
	}
}

// TestApplyWriteOutputsAndDestroy: the whole life of a Terraform object on
// the real source-controller artifact, in runner Pods: apply, outputs in a
// Secret, state in the namespace, runner Pods gone after the run, and
// destroy on deletion.
func TestApplyWriteOutputsAndDestroy(t *testing.T) {
	cl := connect(t)
	ctx := context.Background()
	const content = "hello from the e2e suite"
	tf := cl.terraform(t, "e2e-apply", func(tf *infrav1.Terraform) {
		tf.Spec.Vars = fileVars("out/apply.txt", content)
		tf.Spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{Name: "e2e-apply-outputs", Outputs: []string{"path", "sha256", "meta"}}
	})

	cur := cl.waitForTerraform(t, tf, "Ready", func(tf *infrav1.Terraform) bool {
		c := ready(tf)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	var repo sourcev1.GitRepository
	if err := cl.client.Get(ctx, client.ObjectKey{Namespace: cl.ns, Name: gitRepositoryName}, &repo); err != nil {
		t.Fatal(err)
	}
	if cur.Status.LastAppliedRevision != repo.Status.Artifact.Revision {
		t.Errorf("lastAppliedRevision %q, want the artifact's %q", cur.Status.LastAppliedRevision, repo.Status.Artifact.Revision)
	}

	var out corev1.Secret
	if err := cl.client.Get(ctx, client.ObjectKey{Namespace: cl.ns, Name: "e2e-apply-outputs"}, &out); err != nil {
		t.Fatalf("outputs Secret: %v", err)
	}
	sum := sha256.Sum256([]byte(content))
	if got := string(out.Data["path"]); got != "out/apply.txt" {
		t.Errorf("output path %q", got)
	}
	if got, want := string(out.Data["sha256"]), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("output sha256 %q, want %q", got, want)
	}
	var m struct {
		Path  string `json:"path"`
		Bytes int    `json:"bytes"`
	}
	if err := json.Unmarshal(out.Data["meta"], &m); err != nil || m.Bytes != len(content) || m.Path != "out/apply.txt" {
		t.Errorf("output meta %s (%v)", out.Data["meta"], err)
	}
	state := client.ObjectKey{Namespace: cl.ns, Name: "tfstate-default-e2e-apply"}
	if err := cl.client.Get(ctx, state, &corev1.Secret{}); err != nil {
		t.Errorf("state Secret %s: %v", state.Name, err)
	}

	// Runner Pods are deleted after their run (the chart's runner.keepPods
	// is off).
	if err := cl.poll(ctx, "the runner Pods of e2e-apply to be deleted", func() (bool, string, error) {
		var pods corev1.PodList
		if err := cl.client.List(ctx, &pods, client.InNamespace(cl.ns), client.MatchingLabels{"app.kubernetes.io/name": "landform-runner"}); err != nil {
			return false, "", err
		}
		var left []string
		for _, p := range pods.Items {
			if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == cur.UID {
				left = append(left, p.Name)
			}
		}
		return len(left) == 0, strings.Join(left, ", "), nil
	}); err != nil {
		t.Error(err)
	}

	// Deletion destroys, then removes state and outputs.
	cl.deleteAndWait(t, tf)
	for _, key := range []client.ObjectKey{state, {Namespace: cl.ns, Name: "e2e-apply-outputs"}} {
		if err := cl.client.Get(ctx, key, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("Secret %s after deletion: %v, want NotFound", key.Name, err)
		}
	}
}

// TestManualApproval: a plan waits for approval of exactly its id, given by
// the annotation, and is then applied.
func TestManualApproval(t *testing.T) {
	cl := connect(t)
	ctx := context.Background()
	tf := cl.terraform(t, "e2e-approval", func(tf *infrav1.Terraform) {
		tf.Spec.ApprovePlan = ""
		tf.Spec.Vars = fileVars("out/approval.txt", "approved")
	})
	cur := cl.waitForTerraform(t, tf, "a pending plan", func(tf *infrav1.Terraform) bool {
		c := ready(tf)
		return c != nil && c.Reason == infrav1.PlanPendingReason && tf.Status.Plan != nil && tf.Status.Plan.Pending != ""
	})
	id := cur.Status.Plan.Pending
	if cur.Status.Plan.Add != 1 {
		t.Errorf("pending plan %+v, want one resource to add", cur.Status.Plan)
	}

	patch := client.MergeFrom(cur.DeepCopy())
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations[infrav1.ApproveAnnotation] = id
	if err := cl.client.Patch(ctx, cur, patch); err != nil {
		t.Fatal(err)
	}
	cur = cl.waitForTerraform(t, tf, "Ready after approval", func(tf *infrav1.Terraform) bool {
		c := ready(tf)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	if cur.Status.LastAppliedPlan != id {
		t.Errorf("lastAppliedPlan %q, want the approved %q", cur.Status.LastAppliedPlan, id)
	}
}

// TestCrossNamespaceSourceRefused: with the chart's default
// allowCrossNamespaceRefs=false, a source in another namespace is refused
// with a clear reason, before anything runs.
func TestCrossNamespaceSourceRefused(t *testing.T) {
	cl := connect(t)
	var dep appsv1.Deployment
	if err := cl.client.Get(context.Background(), client.ObjectKey{Namespace: cl.controllerNS, Name: "landform-controller"}, &dep); err != nil {
		t.Fatal(err)
	}
	for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
		if a == "--no-cross-namespace-refs=false" || a == "--allow-cross-namespace-refs" {
			t.Skip("this installation allows cross-namespace references")
		}
	}
	tf := cl.terraform(t, "e2e-cross-ns", func(tf *infrav1.Terraform) {
		tf.Spec.SourceRef.Namespace = cl.controllerNS
		tf.Spec.Vars = fileVars("out/never.txt", "never")
	})
	cur := cl.waitForTerraform(t, tf, "refused", func(tf *infrav1.Terraform) bool {
		c := ready(tf)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == infrav1.CrossNamespaceRefDeniedReason
	})
	if cur.Status.LastAppliedRevision != "" {
		t.Errorf("something was applied: %s", cur.Status.LastAppliedRevision)
	}
}

// TestMissingRunnerServiceAccount: a namespace (here: an object) without
// the runner ServiceAccount gets a condition that says what to do.
func TestMissingRunnerServiceAccount(t *testing.T) {
	cl := connect(t)
	tf := cl.terraform(t, "e2e-no-sa", func(tf *infrav1.Terraform) {
		tf.Spec.ServiceAccountName = "no-such-runner"
		tf.Spec.Vars = fileVars("out/never.txt", "never")
	})
	cur := cl.waitForTerraform(t, tf, "RunnerServiceAccountMissing", func(tf *infrav1.Terraform) bool {
		c := ready(tf)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == infrav1.RunnerServiceAccountMissingReason
	})
	if msg := ready(cur).Message; !strings.Contains(msg, "no-such-runner") {
		t.Errorf("message %q does not name the missing ServiceAccount", msg)
	}
}
