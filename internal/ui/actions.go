package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// notices are what a done action says on the page it returns to (by key,
// so that no text of the request is reflected into the page).
var notices = map[string]string{
	"approve":   "Approved. The controller applies exactly this plan next; this page follows the apply.",
	"reconcile": "Reconcile requested.",
	"suspend":   "Suspended: no plan, apply, drift check or destroy runs until it is resumed.",
	"resume":    "Resumed, and a reconcile requested.",
}

// mayPatch asks the API server whether the user may patch obj: approve,
// reconcile, suspend and resume are all patches of the object. The
// buttons follow the answer; the API server still decides each post.
func (s *Server) mayPatch(ctx context.Context, obj *v1alpha1.Terraform) bool {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: obj.Namespace, Verb: "patch", Group: v1alpha1.GroupVersion.Group, Resource: "terraforms", Name: obj.Name,
		},
	}}
	if err := s.c.Create(ctx, review); err != nil {
		return false
	}
	return review.Status.Allowed
}

// act is POST /t/{ns}/{name}/{action}. Every write is the user's own, so
// a user without the right gets the API server's refusal, shown as such.
func (s *Server) act(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ns, name, action := r.PathValue("ns"), r.PathValue("name"), r.PathValue("action")
	if _, ok := notices[action]; !ok {
		http.NotFound(w, r)
		return
	}
	var obj v1alpha1.Terraform
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &obj); err != nil {
		s.fail(w, r, "reading Terraform "+ns+"/"+name, err)
		return
	}
	status, problem := http.StatusOK, ""
	var err error
	switch action {
	case "approve":
		status, problem, err = s.approve(ctx, &obj, r.PostFormValue("plan"))
	case "reconcile":
		err = s.patch(ctx, &obj, nil, requestedAt())
	case "suspend":
		err = s.patch(ctx, &obj, map[string]any{"suspend": true}, nil)
	case "resume":
		err = s.patch(ctx, &obj, map[string]any{"suspend": nil}, requestedAt())
	}
	if err != nil {
		status, problem = http.StatusInternalServerError, "Nothing was changed: "+err.Error()
		if code := statusCode(err); code != 0 {
			status = code
		}
		if apierrors.IsForbidden(err) {
			problem = "The API server refused: " + err.Error()
		}
		if apierrors.IsConflict(err) {
			problem = "Nothing was changed: the object changed while you acted on it; review it again."
		}
	}
	if problem == "" {
		http.Redirect(w, r, objectPath(ns, name)+"?done="+action, http.StatusSeeOther)
		return
	}
	v, _, verr := s.objectView(ctx, ns, name, 1)
	if verr != nil {
		s.fail(w, r, "reading Terraform "+ns+"/"+name, verr)
		return
	}
	v.Problem = problem
	s.render(w, status, "object.html", v)
}

// approve approves plan, the one the user reviewed, and only while it is
// still the pending plan: the patch carries the resourceVersion it was
// checked at, so a plan that changes meanwhile is a conflict, not an
// approval of something nobody saw.
func (s *Server) approve(ctx context.Context, obj *v1alpha1.Terraform, plan string) (int, string, error) {
	ok, approved, why := approvable(obj)
	pending := obj.PendingPlan()
	switch {
	case plan == "":
		return http.StatusBadRequest, "Not approved: the form named no plan.", nil
	case pending != "" && pending != plan:
		return http.StatusConflict, fmt.Sprintf("Not approved: plan %s, which you reviewed, is no longer the pending plan; %s is. Review it below.", plan, pending), nil
	case approved:
		return http.StatusOK, "", nil
	case !ok:
		return http.StatusConflict, fmt.Sprintf("Not approved: plan %s cannot be approved: %s.", plan, why), nil
	}
	return 0, "", s.patch(ctx, obj, nil, map[string]string{v1alpha1.ApproveAnnotation: plan})
}

func requestedAt() map[string]string {
	return map[string]string{meta.ReconcileRequestAnnotation: time.Now().UTC().Format(time.RFC3339Nano)}
}

// patch merge-patches spec fields and annotations as the user, at the
// resourceVersion the object was read at.
func (s *Server) patch(ctx context.Context, obj *v1alpha1.Terraform, spec map[string]any, annotations map[string]string) error {
	p := map[string]any{"metadata": map[string]any{"resourceVersion": obj.ResourceVersion}}
	if annotations != nil {
		p["metadata"].(map[string]any)["annotations"] = annotations
	}
	if spec != nil {
		p["spec"] = spec
	}
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return s.c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, data))
}

func statusCode(err error) int {
	if s, ok := err.(apierrors.APIStatus); ok {
		return int(s.Status().Code)
	}
	return 0
}
