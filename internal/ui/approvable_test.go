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

	for _, tc := range []struct {
		name, id string
		destroy  int32
		// button: the page offers Approve; says: what it says instead.
		button   bool
		says     string
		approval string
	}{
		{name: "creates", id: "plan-0123456789-0000000003", says: "Approved by approvePlan auto, waiting to be applied"},
		{name: "destroys", id: "plan-0123456789-0000000004", destroy: 1, button: true, approval: "plan-0123456789-0000000004"},
	} {
		obj := pendingObject(t, ns, tc.name, tc.id)
		obj.Spec.ApprovePlan = v1alpha1.ApprovePlanAuto
		if err := env.Client.Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
		obj.Status.Plan.Destroy = tc.destroy
		if err := env.Client.Status().Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
		plan := sectionText(get(t, c, s.base()+objectPath(ns, tc.name)), "plan")
		if strings.Contains(plan, "Approve plan "+tc.id) != tc.button || !strings.Contains(plan, tc.says) {
			t.Errorf("%s under approvePlan auto: want the approve button %v and %q; the plan section:\n%s", tc.name, tc.button, tc.says, plan)
		}
		if got := post(tc.name, tc.id); got != http.StatusOK {
			t.Errorf("%s: approving: %d; want 200", tc.name, got)
		}
		if a := annotation(t, ns, tc.name); a != tc.approval {
			t.Errorf("%s: approving wrote the approval %q; want %q", tc.name, a, tc.approval)
		}
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
