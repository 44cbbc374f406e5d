package ui

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/landform-dev/landform/api/v1alpha1"
)

// TestApprovableAsTheController: the page offers an approval only where
// the controller waits for one. Under approvePlan auto a plan that only
// creates is applied without one (the page used to offer the button, and
// its post wrote an approval nobody needed); one that destroys is held and
// offered. A post to an object deleted behind destroyApproval manual
// before its destroy plan exists is refused, not a crash.
func TestApprovableAsTheController(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	s := serve(t, env.Config, Options{Namespace: ns})
	c := httpClient(t, s)
	post := func(name, plan string) int {
		t.Helper()
		form := url.Values{"csrf": {s.csrf}, "plan": {plan}}
		return status(t, c, "POST", s.base()+objectPath(ns, name)+"/approve", form, map[string]string{"Origin": s.base()})
	}

	creates := pendingObject(t, ns, "creates", "plan-0123456789-0000000003")
	creates.Spec.ApprovePlan = v1alpha1.ApprovePlanAuto
	if err := env.Client.Update(ctx, creates); err != nil {
		t.Fatal(err)
	}
	plan := sectionText(get(t, c, s.base()+objectPath(ns, "creates")), "plan")
	if strings.Contains(plan, "Approve plan") || !strings.Contains(plan, "Approved by approvePlan auto, waiting to be applied") {
		t.Errorf("a creating plan under approvePlan auto: want no approve button and the auto approval said; the plan section:\n%s", plan)
	}
	if got := post("creates", "plan-0123456789-0000000003"); got != http.StatusOK {
		t.Errorf("approving a plan auto applies: %d; want 200, nothing to do", got)
	}
	if a := annotation(t, ns, "creates"); a != "" {
		t.Errorf("approving a plan auto applies wrote the approval %q; want none", a)
	}

	destroys := pendingObject(t, ns, "destroys", "plan-0123456789-0000000004")
	destroys.Spec.ApprovePlan = v1alpha1.ApprovePlanAuto
	if err := env.Client.Update(ctx, destroys); err != nil {
		t.Fatal(err)
	}
	destroys.Status.Plan.Destroy, destroys.Status.Plan.ResourcesToDestroy = 1, []string{"terraform_data.database"}
	if err := env.Client.Status().Update(ctx, destroys); err != nil {
		t.Fatal(err)
	}
	if plan := sectionText(get(t, c, s.base()+objectPath(ns, "destroys")), "plan"); !strings.Contains(plan, "Approve plan plan-0123456789-0000000004") {
		t.Errorf("a destroying plan held under approvePlan auto: want the approve button; the plan section:\n%s", plan)
	}
	if got := post("destroys", "plan-0123456789-0000000004"); got != http.StatusOK {
		t.Errorf("approving a held plan: %d; want 200", got)
	}
	if a := annotation(t, ns, "destroys"); a != "plan-0123456789-0000000004" {
		t.Errorf("approving a held plan approved %q", a)
	}

	gated := pendingObject(t, ns, "gated", "plan-0123456789-0000000005")
	gated.Spec.DestroyApproval = v1alpha1.DestroyApprovalManual
	gated.Finalizers = []string{v1alpha1.Finalizer}
	if err := env.Client.Update(ctx, gated); err != nil {
		t.Fatal(err)
	}
	gated.Status.Plan = nil
	if err := env.Client.Status().Update(ctx, gated); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, gated); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		obj := current(t, ns, "gated")
		obj.Finalizers = nil
		_ = env.Client.Update(ctx, obj)
	})
	if got := post("gated", "plan-0123456789-0000000005"); got != http.StatusConflict {
		t.Errorf("approving a deleted object's plan that is gone: %d; want 409", got)
	}
	if a := annotation(t, ns, "gated"); a != "" {
		t.Errorf("a refused post approved %q", a)
	}
}
