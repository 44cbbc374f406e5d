package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

func TestApprove(t *testing.T) {
	ns := namespace(t, "approve")
	// A plan that only creates: approved without a question.
	createOnly := func(obj *v1alpha1.Terraform) {
		pending(obj)
		obj.Status.Plan.Add, obj.Status.Plan.Change, obj.Status.Plan.Destroy = 1, 0, 0
		obj.Status.Plan.Resources = []string{"terraform_data.cache"}
		obj.Status.Plan.Replace, obj.Status.Plan.ResourcesToReplace, obj.Status.Plan.ResourcesToDestroy = 0, nil, nil
	}
	for _, tt := range []struct {
		name  string
		state func(*v1alpha1.Terraform)
		// stored is the stored plan's id; none when empty.
		stored   string
		args     []string
		stdin    string
		approved bool // whether the annotation is set afterwards
	}{
		{name: "destroys-yes", state: pending, stored: pendingPlan, stdin: "y\n", approved: true},
		{name: "destroys-no", state: pending, stored: pendingPlan, stdin: "n\n"},
		{name: "destroys-no-answer", state: pending, stored: pendingPlan},
		{name: "destroys-flag-yes", state: pending, stored: pendingPlan, args: []string{"--yes"}, approved: true},
		{name: "matching-plan-flag", state: pending, stored: pendingPlan, args: []string{"--plan", pendingPlan, "-y"}, approved: true},
		{name: "other-plan-flag", state: pending, stored: pendingPlan, args: []string{"--plan", "plan-0000000000-0000000000", "-y"}},
		{name: "creates-only", state: createOnly, approved: true},
		// approvePlan auto holds a plan that destroys: it is approved like
		// a manual one, not reported as approved already.
		{name: "auto-held-destructive", state: heldDestructive, stored: pendingPlan, stdin: "y\n", approved: true},
		{name: "plan-unreadable", state: pending, stdin: "yes\n", approved: true},
		{name: "no-pending-plan", state: applied},
		{name: "never-planned", state: func(*v1alpha1.Terraform) {}},
		{name: "plan-only", state: func(obj *v1alpha1.Terraform) { obj.Spec.PlanOnly = true; pending(obj) }, stored: pendingPlan},
		{name: "already-approved", state: func(obj *v1alpha1.Terraform) {
			obj.Annotations = map[string]string{v1alpha1.ApproveAnnotation: pendingPlan}
			pending(obj)
		}, approved: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := terraform(t, ns, tt.name, func(obj *v1alpha1.Terraform) {
				obj.Annotations = map[string]string{"team": "a"}
				tt.state(obj)
				obj.Annotations["team"] = "a"
			})
			if tt.stored != "" {
				storePlan(t, obj, tt.stored, rev2, false)
			}
			before := snapshot(t, obj)
			r := run(t, tt.stdin, append([]string{"approve", "-n", ns, tt.name}, tt.args...)...)
			golden(t, "approve/"+tt.name, r.transcript())

			want := ""
			if tt.approved {
				want = pendingPlan
			}
			after := snapshot(t, obj)
			onlyAnnotationChanged(t, before, deepCopyMap(after), v1alpha1.ApproveAnnotation, want)
			if (r.err == nil) != tt.approved {
				t.Errorf("approved %v, but the command returned %v", tt.approved, r.err)
			}
		})
	}
}

// TestApproveForbidden runs approve as a user who may read but not patch
// Terraform objects.
func TestApproveForbidden(t *testing.T) {
	ns := namespace(t, "approve-rbac")
	obj := terraform(t, ns, "database", pending)
	storePlan(t, obj, pendingPlan, rev2, false)
	grant(t, ns, "viewer", rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"terraforms"}, Verbs: []string{"get", "list"}})

	before := snapshot(t, obj)
	r := run(t, "", "approve", "-n", ns, "database", "--yes", "--as", "viewer")
	golden(t, "approve/forbidden", r.transcript())
	onlyAnnotationChanged(t, before, snapshot(t, obj), v1alpha1.ApproveAnnotation, "")

	r = run(t, "", "approve", "-n", ns, "database", "--yes", "--as", "nobody")
	golden(t, "approve/forbidden-get", r.transcript())
}

// grant gives user the rules in namespace ns.
func grant(t *testing.T, ns, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user}, Rules: rules}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := env.Client.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	// The API server's authorizer learns bindings from its informers: wait
	// until the grant is in effect, or a test sees a stale denial.
	r := rules[0]
	deadline := time.Now().Add(30 * time.Second)
	for {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Group: r.APIGroups[0], Resource: r.Resources[0], Verb: r.Verbs[0],
			},
		}}
		if err := env.Client.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the grant to %s never took effect", user)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestApproveFile approves through Git: the manifest gets the plan id,
// the object in the cluster does not change.
func TestApproveFile(t *testing.T) {
	ns := namespace(t, "approve-file")
	manifest := func(name, approvePlan string) string {
		m := "# " + name + ", reviewed by the platform team\n" +
			"apiVersion: infra.landform.dev/v1alpha1\n" +
			"kind: Terraform\n" +
			"metadata:\n" +
			"  name: " + name + "\n" +
			"  namespace: " + ns + "\n" +
			"spec:\n"
		if approvePlan != "" {
			m += "  approvePlan: " + approvePlan + "  # set by landform approve -f\n"
		}
		return m + "  # the module\n" +
			"  path: ./modules/" + name + "\n" +
			"  sourceRef:\n" +
			"    kind: GitRepository\n" +
			"    name: infra\n"
	}
	for _, tt := range []struct {
		name  string
		state func(*v1alpha1.Terraform)
		file  string
		flags []string
		// want is the file afterwards; the same as before when empty.
		want string
	}{
		{name: "written", state: pending, file: manifest("written", ""), flags: []string{"--yes"},
			want: strings.Replace(manifest("written", ""), "spec:\n", "spec:\n  approvePlan: "+pendingPlan+"\n", 1)},
		{name: "replaced", state: pending, file: manifest("replaced", appliedPlan), flags: []string{"--yes", "-o", "json"}, want: manifest("replaced", pendingPlan)},
		{name: "asked", state: pending, file: manifest("asked", "")},
		{name: "already", state: pending, file: manifest("already", pendingPlan)},
		{name: "no-object", state: pending, file: manifest("other", ""), flags: []string{"--yes"}},
		{name: "auto", state: heldDestructive, file: manifest("auto", "auto"), flags: []string{"--yes"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := terraform(t, ns, tt.name, tt.state)
			storePlan(t, obj, pendingPlan, rev2, false)
			// The manifest in a checkout of the Git repository, named as
			// a user names it there.
			repo := t.TempDir()
			rel := filepath.Join("infra", ns, tt.name+".yaml")
			file := filepath.Join(repo, rel)
			if err := os.MkdirAll(filepath.Dir(file), 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte(tt.file), 0o640); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, obj)
			r := runIn(t, repo, "", append([]string{"approve", "-n", ns, tt.name, "-f", rel}, tt.flags...)...)
			golden(t, "approve/file-"+tt.name, r.transcript())

			got, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if want == "" {
				want = tt.file
			}
			if diff := cmp.Diff(want, string(got)); diff != "" {
				t.Errorf("the manifest differs (-want +got):\n%s", diff)
			}
			if info, err := os.Stat(file); err != nil || info.Mode().Perm() != 0o640 {
				t.Errorf("the manifest's mode changed: %v %v", info.Mode(), err)
			}
			if entries, _ := os.ReadDir(filepath.Dir(file)); len(entries) != 1 {
				t.Errorf("files left beside the manifest: %v", entries)
			}
			onlyAnnotationChanged(t, before, snapshot(t, obj), v1alpha1.ApproveAnnotation, "")
		})
	}
}

func TestApproveOutput(t *testing.T) {
	ns := namespace(t, "approve-output")
	obj := terraform(t, ns, "database", pending)
	storePlan(t, obj, pendingPlan, rev2, false)
	golden(t, "approve/yaml", run(t, "", "approve", "-n", ns, "database", "--yes", "-o", "yaml").transcript())
	golden(t, "approve/yaml-already", run(t, "", "approve", "-n", ns, "database", "-o", "yaml").transcript())
}
