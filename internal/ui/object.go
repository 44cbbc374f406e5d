package ui

import (
	"context"
	"net/http"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/outputs"
	"github.com/landform-dev/landform/internal/planstore"
	"github.com/landform-dev/landform/internal/runlog"
)

// objectView is an object's page.
type objectView struct {
	page
	Obj  *v1alpha1.Terraform
	Live liveView
	Plan planView
	// Drift is what the last drift check found changed outside Landform.
	Drift     driftView
	Logs      logsView
	Events    section[eventRow]
	Outputs   section[outputs.Row]
	Versions  section[versionRow]
	DependsOn []dependencyRow
	Consumers section[consumerRow]
	// May is true when the user may patch the object: approve, reconcile,
	// suspend and resume are all patches.
	May bool
	// Notice and Problem are what the last action did or why it did not.
	Notice, Problem string
	Stream          string
}

// section is a part of the page with what the user may not read said as
// such.
type section[T any] struct {
	Rows []T
	// Err is why the section is empty: the API server's refusal, or
	// another error, as the user should read it.
	Err string
}

// liveView is the part of the page that follows the object as it
// changes: status, conditions, revisions, the run.
type liveView struct {
	facts
	Conditions []metav1.Condition
	Run        *v1alpha1.RunStatus
	Attempted  string
	Planned    string
	Applied    string
	LastPlan   string
	// ShownPlan is the pending plan the page shows; Newer is the pending
	// plan now when it is another (the page's Approve no longer applies).
	ShownPlan string
	Newer     string
	Gone      bool
}

func liveOf(obj *v1alpha1.Terraform, f facts, shownPlan string) liveView {
	l := liveView{facts: f, Conditions: obj.Status.Conditions, Run: obj.Status.Run, Attempted: obj.Status.LastAttemptedRevision,
		Planned: obj.Status.LastPlannedRevision, Applied: obj.Status.LastAppliedRevision, LastPlan: obj.Status.LastAppliedPlan, ShownPlan: shownPlan}
	if f.Plan != shownPlan {
		l.Newer = f.Plan
	}
	return l
}

// objectPage is GET /t/{ns}/{name}.
func (s *Server) objectPage(w http.ResponseWriter, r *http.Request) {
	v, status, err := s.objectView(r.Context(), r.PathValue("ns"), r.PathValue("name"), pageNumber(r))
	if err != nil {
		s.fail(w, r, "reading Terraform "+r.PathValue("ns")+"/"+r.PathValue("name"), err)
		return
	}
	v.Notice = notices[r.URL.Query().Get("done")]
	s.render(w, status, "object.html", v)
}

func (s *Server) objectView(ctx context.Context, ns, name string, pageNo int) (*objectView, int, error) {
	var obj v1alpha1.Terraform
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &obj); err != nil {
		return nil, 0, err
	}
	f := factsOf(&obj, s.now())
	v := &objectView{page: s.page(ns + "/" + name), Obj: &obj}
	// The stored plan, read once: the diff and the outputs' sensitivity
	// both come from it.
	var stored *planstore.Plan
	var loadErr error
	if p := obj.Status.Plan; p != nil && p.ID != "" || len(obj.Status.AvailableOutputs) > 0 {
		stored, loadErr = planstore.Store{Client: s.c}.Load(ctx, &obj)
	}
	v.Plan, v.Drift = s.planOf(&obj, stored, loadErr, pageNo)
	v.Live = liveOf(&obj, f, v.Plan.ID)
	v.Logs = s.logsOf(ctx, &obj)
	v.Events = s.eventsOf(ctx, &obj)
	v.Outputs = s.outputsOf(ctx, &obj, stored)
	v.Versions = s.versionsOf(ctx, &obj)
	v.DependsOn = s.dependenciesOf(ctx, &obj)
	v.Consumers = s.consumersOf(ctx, &obj)
	v.May = s.mayPatch(ctx, &obj)
	v.Stream = "/stream" + objectPath(ns, name) + "?plan=" + v.Plan.ID
	return v, http.StatusOK, nil
}

// logsView is the runs' logs, by phase in run order.
type logsView struct {
	Phases []runlog.PhaseLog
	Err    string
}

// logLines bounds a phase's log on the page; the CLI's `logs` has all.
const logLines = 400

func (s *Server) logsOf(ctx context.Context, obj *v1alpha1.Terraform) logsView {
	logs, err := runlog.Read(ctx, s.c, obj.Namespace, obj.Name)
	if err != nil {
		return logsView{Err: refusal(err, "read the run logs (get secrets "+runlog.SecretName(obj.Name)+")")}
	}
	return logsFrom(logs)
}

// logsFrom is the page's view of the logs kept.
func logsFrom(logs map[runlog.Phase]runlog.PhaseLog) logsView {
	var v logsView
	for _, p := range runlog.Phases {
		if l, ok := logs[p]; ok {
			l.Text = lastLines(l.Text, logLines)
			v.Phases = append(v.Phases, l)
		}
	}
	slices.SortStableFunc(v.Phases, func(a, b runlog.PhaseLog) int { return b.StartedAt.Compare(a.StartedAt) })
	return v
}

// refusal says why a read failed, the API server's refusal as such.
func refusal(err error, what string) string {
	if apierrors.IsForbidden(err) {
		return "The API server refused to let you " + what + ": " + err.Error()
	}
	return "Could not " + what + ": " + err.Error()
}
