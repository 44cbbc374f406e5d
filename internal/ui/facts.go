package ui

import (
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/approval"
)

// States a row can be filtered by (?state=).
const (
	stateReady     = "ready"
	statePending   = "pending"
	stateDrifted   = "drifted"
	stateSuspended = "suspended"
	stateFailing   = "failing"
)

// facts is what the list and the object page say about an object at a
// glance.
type facts struct {
	Namespace, Name string
	// Ready is the Ready condition's status: True, False or Unknown.
	Ready   string
	Reason  string
	Message string
	// Plan is the id of the plan waiting for approval; Destructive when it
	// destroys or replaces resources; Approved when an approval names it or
	// approvePlan auto applies it (package approval).
	Plan        string
	Destructive bool
	Approved    bool
	Drifted     bool
	Suspended   bool
	Failing     bool
	Preview     bool
	Revision    string
	Age         string
}

func factsOf(obj *v1alpha1.Terraform, now time.Time) facts {
	f := facts{Namespace: obj.Namespace, Name: obj.Name, Ready: string(metav1.ConditionUnknown), Suspended: obj.Spec.Suspend, Preview: obj.IsPreview()}
	if c := apimeta.FindStatusCondition(obj.Status.Conditions, meta.ReadyCondition); c != nil {
		f.Ready, f.Reason, f.Message = string(c.Status), c.Reason, c.Message
	}
	stalled := apimeta.IsStatusConditionTrue(obj.Status.Conditions, meta.StalledCondition)
	reconciling := apimeta.IsStatusConditionTrue(obj.Status.Conditions, meta.ReconcilingCondition)
	f.Failing = stalled || f.Ready == string(metav1.ConditionFalse) && !reconciling && obj.PendingPlan() == ""
	f.Drifted = apimeta.IsStatusConditionTrue(obj.Status.Conditions, v1alpha1.DriftedCondition)
	if p := obj.Status.Plan; p != nil && p.Pending != "" {
		f.Plan = p.Pending
		f.Destructive = p.Destroy > 0 || p.Replace > 0 || len(p.ResourcesToDestroy) > 0 || len(p.ResourcesToReplace) > 0
		st := approval.Of(obj)
		f.Approved = st == approval.Approved || st == approval.AutoApproved
	}
	f.Revision = obj.Status.LastAppliedRevision
	if f.Preview {
		f.Revision = obj.Status.LastPlannedRevision
	}
	f.Age = age(now, obj.CreationTimestamp.Time)
	return f
}

// is reports whether the object is in state (one of the state* filters;
// "" matches all).
func (f facts) is(state string) bool {
	switch state {
	case "":
		return true
	case stateReady:
		return f.Ready == string(metav1.ConditionTrue)
	case statePending:
		return f.Plan != "" && !f.Approved
	case stateDrifted:
		return f.Drifted
	case stateSuspended:
		return f.Suspended
	case stateFailing:
		return f.Failing
	}
	return false
}

// matches applies the list's filters.
func (f facts) matches(flt filter) bool {
	return (flt.Namespace == "" || f.Namespace == flt.Namespace) && f.is(flt.State) &&
		(flt.Query == "" || strings.Contains(f.Namespace+"/"+f.Name, flt.Query))
}

// shortRevision is "main@sha1:0123456789ab" for a full revision.
func shortRevision(r string) string {
	if i := strings.LastIndex(r, ":"); i >= 0 && len(r)-i-1 > 12 {
		return r[:i+13]
	}
	return r
}

func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t))
}
