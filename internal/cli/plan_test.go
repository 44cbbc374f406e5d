package cli

import (
	"strings"
	"testing"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/planstore"
)

func TestPlanShow(t *testing.T) {
	ns := namespace(t, "plan")
	objs := fixtureStates(t, ns, "plan")
	storePlan(t, objs[objPending], pendingPlan, rev2, false)
	storePlan(t, objs[objReady], appliedPlan, rev1, true)
	storePlan(t, terraform(t, ns, "destructive", heldDestructive), pendingPlan, rev2, false)
	// A pending plan nobody need approve says so, as `status` does.
	storePlan(t, terraform(t, ns, "approved", func(obj *v1alpha1.Terraform) {
		obj.Annotations = map[string]string{v1alpha1.ApproveAnnotation: pendingPlan}
		pending(obj)
	}), pendingPlan, rev2, false)
	storePlan(t, terraform(t, ns, "plan-only", func(obj *v1alpha1.Terraform) {
		obj.Spec.PlanOnly = true
		pending(obj)
	}), pendingPlan, rev2, false)
	// The status names a plan other than the stored one (a save under way).
	storePlan(t, objs[objLocked], "plan-3333333333-c3c3c3c3c3", rev2, false)
	stale := objs[objLocked]
	pending(stale)
	if err := env.Client.Status().Update(t.Context(), stale); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		golden string
		args   []string
	}{
		{"plan/pending", []string{"plan", "show", "-n", ns, objPending}},
		{"plan/pending-json", []string{"plan", "show", "-n", ns, objPending, "--json"}},
		{"plan/destructive", []string{"plan", "show", "-n", ns, "destructive"}},
		{"plan/approved", []string{"plan", "show", "-n", ns, "approved"}},
		{"plan/plan-only", []string{"plan", "show", "-n", ns, "plan-only"}},
		{"plan/applied", []string{"plan", "show", "-n", ns, objReady}},
		{"plan/no-plan", []string{"plan", "show", "-n", ns, objNew}},
		{"plan/stale", []string{"plan", "show", "-n", ns, objLocked}},
		{"plan/not-found", []string{"plan", "show", "-n", ns, "missing"}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			r := run(t, "", tt.args...)
			golden(t, tt.golden, r.transcript())
			if strings.Contains(r.stdout, "s3cr3t-new") {
				t.Errorf("the output shows the sensitive password")
			}
		})
	}
}

// A plan that imports says so before terraform's text: its counts and
// every address it imports.
func TestPlanShowImports(t *testing.T) {
	ns := namespace(t, "plan-import")
	obj := terraform(t, ns, "import", func(obj *v1alpha1.Terraform) {
		obj.Spec.Imports = []v1alpha1.Import{{To: "landform_database.main", ID: "db-ac53ede328"}, {To: "landform_security_group.web", ID: "sg-7684c44467"}}
		pending(obj)
		obj.Status.Plan.Add, obj.Status.Plan.Change, obj.Status.Plan.Destroy, obj.Status.Plan.Replace = 1, 1, 0, 0
		obj.Status.Plan.Import = 2
		obj.Status.Plan.Resources = []string{"landform_database.main", "landform_security_group.web", "terraform_data.tag"}
		obj.Status.Plan.ResourcesToImport = []string{"landform_database.main", "landform_security_group.web"}
		obj.Status.Plan.ResourcesToReplace, obj.Status.Plan.ResourcesToDestroy = nil, nil
	})
	jsonPlan, humanPlan := readFixturePlan(t, "import-plan")
	p := &planstore.Plan{ID: pendingPlan, Revision: rev2, InputsDigest: "inputs", PlanFile: []byte("binary plan"), JSONPlan: jsonPlan, HumanPlan: humanPlan}
	if err := (planstore.Store{Client: env.Client}).Save(t.Context(), obj, p); err != nil {
		t.Fatal(err)
	}
	golden(t, "plan/import", run(t, "", "plan", "show", "-n", ns, "import").transcript())
}
