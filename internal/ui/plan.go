package ui

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/approval"
	"github.com/landform-dev/landform/internal/planstore"
	"github.com/landform-dev/landform/internal/planview"
)

// planView is the stored plan as a resource-by-resource diff, one page
// of it.
type planView struct {
	// ID is the plan shown; Pending is true when it waits for approval.
	ID      string
	Pending bool
	Status  *v1alpha1.PlanStatus
	// Resources is this page's share of the changes, replaces and
	// destroys first.
	Resources []planview.Resource
	Total     int
	Page      int
	Pages     int
	// Approvable is true when an approval would apply it; else Why says
	// why not.
	Approvable bool
	Approved   bool
	Why        string
	Err        string
}

// driftView is what a drift check found.
type driftView struct {
	Drifted   bool
	Message   string
	Resources []planview.Resource
}

func pageNumber(r *http.Request) int {
	n, err := strconv.Atoi(r.URL.Query().Get("page"))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// planOf shows p, the stored plan (loadErr: why there is none), as the
// status names it. Sensitive values are masked before anything else reads
// it (planview.Diff).
func (s *Server) planOf(obj *v1alpha1.Terraform, p *planstore.Plan, loadErr error, pageNo int) (planView, driftView) {
	v := planView{Status: obj.Status.Plan, Page: pageNo}
	var d driftView
	if c := apimeta.FindStatusCondition(obj.Status.Conditions, v1alpha1.DriftedCondition); c != nil && c.Status == "True" {
		d.Drifted, d.Message = true, c.Message
	}
	st := obj.Status.Plan
	if st == nil || st.ID == "" {
		return v, d
	}
	v.ID, v.Pending = st.ID, st.Pending != "" && st.Pending == st.ID
	v.Approvable, v.Approved, v.Why = approvable(obj)
	switch err := loadErr; {
	case errors.Is(err, planstore.ErrNotFound) || p == nil:
		v.Err = "The stored plan is gone (applied plans are deleted); the status above is what is known of it."
		return v, d
	case err != nil:
		v.Err = refusal(err, "read the stored plan (get secrets)")
		return v, d
	case p.ID != st.ID:
		v.Err = fmt.Sprintf("The stored plan is %s, not %s: the controller is storing a new plan; this page follows it.", p.ID, st.ID)
		return v, d
	case st.Digest != "" && p.Digest != st.Digest:
		// Show only what the controller would apply.
		v.Err = fmt.Sprintf("The stored plan %s was changed after it was made: the controller will not apply it and will plan again.", p.ID)
		v.Approvable, v.Why = false, "its stored bytes were changed"
		return v, d
	}
	changes, drift, err := planview.Diff(p.JSONPlan, planview.SecretVariables(&obj.Spec))
	if err != nil {
		v.Err = "The stored plan could not be read: " + err.Error()
		return v, d
	}
	d.Resources = drift
	v.Total = len(changes)
	v.Pages = max(1, (len(changes)+s.pageSize-1)/s.pageSize)
	v.Page = min(pageNo, v.Pages)
	v.Resources = changes[(v.Page-1)*s.pageSize : min(len(changes), v.Page*s.pageSize)]
	return v, d
}

// approvable says whether approving the pending plan would apply it, as
// `landform approve` and the controller decide (package approval).
func approvable(obj *v1alpha1.Terraform) (ok, approved bool, why string) {
	switch approval.Of(obj) {
	case approval.NoPendingPlan:
		return false, false, "no plan waits for approval"
	case approval.NotAppliedPreview:
		return false, false, "a preview's plans are never applied: a merge applies through " + obj.PreviewTargetKey()
	case approval.NotAppliedPlanOnly:
		return false, false, "spec.planOnly is set: its plans are never applied"
	case approval.Approved:
		return false, true, "Approved, waiting to be applied"
	case approval.AutoApproved:
		return false, true, "Approved by approvePlan auto, waiting to be applied"
	}
	return true, false, ""
}

// attrClass is the CSS class of an attribute's row.
func attrClass(a planview.Attribute) string {
	switch {
	case a.ForcesReplacement:
		return "replace"
	case a.Before == "":
		return "add"
	case a.After == "" || a.After == "null":
		return "remove"
	case a.Changed:
		return "change"
	}
	return ""
}

// actionClass is the CSS class of a resource's change.
func actionClass(r planview.Resource) string {
	switch {
	case r.Actions.Replace():
		return "replace"
	case r.Actions.Delete():
		return "destroy"
	case r.Actions.Create():
		return "create"
	case r.Actions.Update():
		return "update"
	}
	return strings.ToLower(strings.Trim(r.Note, " ()"))
}
