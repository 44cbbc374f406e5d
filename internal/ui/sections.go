package ui

import (
	"context"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxcd/pkg/apis/meta"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/inputs"
	"github.com/landform-dev/landform/internal/outputs"
	"github.com/landform-dev/landform/internal/planstore"
	"github.com/landform-dev/landform/internal/planview"
	"github.com/landform-dev/landform/internal/statehistory"
)

// maxEvents is how many of the object's events the page shows, newest
// first.
const maxEvents = 25

type eventRow struct {
	Type, Reason, Message, Age string
	Count                      int32
	at                         time.Time
}

func (s *Server) eventsOf(ctx context.Context, obj *v1alpha1.Terraform) section[eventRow] {
	var l corev1.EventList
	if err := s.c.List(ctx, &l, client.InNamespace(obj.Namespace), client.MatchingFields{"involvedObject.name": obj.Name}); err != nil {
		return section[eventRow]{Err: refusal(err, "list events")}
	}
	var rows []eventRow
	for _, e := range l.Items {
		if e.InvolvedObject.Kind != v1alpha1.TerraformKind || e.InvolvedObject.UID != obj.UID {
			continue
		}
		at := e.LastTimestamp.Time
		for _, t := range []time.Time{e.EventTime.Time, e.FirstTimestamp.Time, e.CreationTimestamp.Time} {
			if at.IsZero() {
				at = t
			}
		}
		rows = append(rows, eventRow{Type: e.Type, Reason: e.Reason, Message: e.Message, Count: max(e.Count, 1), at: at})
	}
	slices.SortStableFunc(rows, func(a, b eventRow) int { return b.at.Compare(a.at) })
	rows = rows[:min(len(rows), maxEvents)]
	for i := range rows {
		rows[i].Age = age(s.now(), rows[i].at)
	}
	return section[eventRow]{Rows: rows}
}

// outputsOf shows the outputs written into the outputs Secret; a
// sensitive output's value (or any output whose sensitivity is unknown)
// is never put into the page.
func (s *Server) outputsOf(ctx context.Context, obj *v1alpha1.Terraform, stored *planstore.Plan) section[outputs.Row] {
	names := obj.Status.AvailableOutputs
	if len(names) == 0 {
		return section[outputs.Row]{}
	}
	sensitive := func(string) bool { return true }
	if stored != nil {
		if d, err := planview.Read(stored.JSONPlan); err == nil {
			sensitive = func(n string) bool {
				known, ok := d.Sensitive[n]
				return !ok || known
			}
		}
	}
	view := outputs.View{Spec: obj.Spec.WriteOutputsToSecret, Names: names, Sensitive: sensitive, Hidden: planview.SensitiveValue}
	var v section[outputs.Row]
	if spec := view.Spec; spec != nil {
		var secret corev1.Secret
		err := s.c.Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: spec.Name}, &secret)
		switch {
		case apierrors.IsNotFound(err):
			view.Absent = true
		case err != nil:
			v.Err = refusal(err, "read Secret "+spec.Name+" (get secrets)")
			return v
		}
		view.Data = secret.Data
	}
	v.Rows = view.Rows()
	return v
}

type versionRow struct {
	statehistory.Version
	Age string
}

func (s *Server) versionsOf(ctx context.Context, obj *v1alpha1.Terraform) section[versionRow] {
	vs, err := statehistory.List(ctx, s.c, obj)
	if err != nil {
		return section[versionRow]{Err: refusal(err, "list the kept state versions (list secrets)")}
	}
	var v section[versionRow]
	for i := len(vs) - 1; i >= 0; i-- {
		v.Rows = append(v.Rows, versionRow{Version: vs[i], Age: age(s.now(), vs[i].KeptAt)})
	}
	return v
}

type dependencyRow struct {
	Kind, Namespace, Name string
	// Ready is the dependency's Ready condition, "Unknown" when unread;
	// Link is its page when it is a Terraform object.
	Ready, Message, Link string
}

// dependenciesOf reads each dependsOn object's Ready condition.
func (s *Server) dependenciesOf(ctx context.Context, obj *v1alpha1.Terraform) []dependencyRow {
	var rows []dependencyRow
	for _, d := range obj.Spec.DependsOn {
		// Defaulted as the controller defaults it.
		gvk, key := inputs.DependencyKey(obj, d)
		r := dependencyRow{Kind: gvk.Kind, Namespace: key.Namespace, Name: key.Name, Ready: "Unknown"}
		if gvk.Version == "" {
			r.Message = "apiVersion " + d.APIVersion + " is not group/version"
			rows = append(rows, r)
			continue
		}
		if isTerraform(gvk) {
			r.Link = objectPath(r.Namespace, r.Name)
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if err := s.c.Get(ctx, key, u); err != nil {
			r.Message = refusal(err, "read it")
			rows = append(rows, r)
			continue
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if cm, ok := c.(map[string]any); ok && cm["type"] == meta.ReadyCondition {
				r.Ready, r.Message = str(cm["status"]), str(cm["message"])
			}
		}
		rows = append(rows, r)
	}
	return rows
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// isTerraform reports a Terraform object's kind.
func isTerraform(gvk schema.GroupVersionKind) bool {
	return gvk.Kind == v1alpha1.TerraformKind && gvk.Group == v1alpha1.GroupVersion.Group
}

type consumerRow struct {
	Kind, Namespace, Name, How, Link string
}

// consumersOf finds what consumes obj: Terraform objects that depend on
// it or read its outputs Secret, and workloads that mount or read that
// Secret.
func (s *Server) consumersOf(ctx context.Context, obj *v1alpha1.Terraform) section[consumerRow] {
	var v section[consumerRow]
	secret := ""
	if obj.Spec.WriteOutputsToSecret != nil {
		secret = obj.Spec.WriteOutputsToSecret.Name
	}
	l, _, err := s.list(ctx, filter{})
	if err != nil {
		v.Err = refusal(err, "list Terraform objects")
	}
	for _, t := range l.Items {
		for _, d := range t.Spec.DependsOn {
			if gvk, key := inputs.DependencyKey(&t, d); isTerraform(gvk) && key == client.ObjectKeyFromObject(obj) {
				v.Rows = append(v.Rows, consumerRow{Kind: v1alpha1.TerraformKind, Namespace: t.Namespace, Name: t.Name, How: "dependsOn", Link: objectPath(t.Namespace, t.Name)})
			}
		}
		for _, ref := range t.Spec.VarsFrom {
			if secret != "" && ref.Kind == "Secret" && ref.Name == secret && t.Namespace == obj.Namespace {
				v.Rows = append(v.Rows, consumerRow{Kind: v1alpha1.TerraformKind, Namespace: t.Namespace, Name: t.Name, How: "varsFrom Secret " + secret, Link: objectPath(t.Namespace, t.Name)})
			}
		}
	}
	if secret == "" {
		return v
	}
	var problems []string
	add := func(kind, name string, spec corev1.PodSpec) {
		if how := outputs.SecretReads(spec)[secret]; len(how) > 0 {
			v.Rows = append(v.Rows, consumerRow{Kind: kind, Namespace: obj.Namespace, Name: name, How: "Secret " + secret + ": " + strings.Join(how, "; ")})
		}
	}
	var deps appsv1.DeploymentList
	var sts appsv1.StatefulSetList
	var dss appsv1.DaemonSetList
	var pods corev1.PodList
	for _, w := range []struct {
		list client.ObjectList
		what string
	}{{&deps, "deployments"}, {&sts, "statefulsets"}, {&dss, "daemonsets"}, {&pods, "pods"}} {
		if err := s.c.List(ctx, w.list, client.InNamespace(obj.Namespace)); err != nil {
			problems = append(problems, refusal(err, "list "+w.what))
		}
	}
	for _, d := range deps.Items {
		add("Deployment", d.Name, d.Spec.Template.Spec)
	}
	for _, d := range sts.Items {
		add("StatefulSet", d.Name, d.Spec.Template.Spec)
	}
	for _, d := range dss.Items {
		add("DaemonSet", d.Name, d.Spec.Template.Spec)
	}
	for _, p := range pods.Items {
		if len(p.OwnerReferences) == 0 { // owned Pods are their workload's
			add("Pod", p.Name, p.Spec)
		}
	}
	if len(problems) > 0 {
		v.Err = strings.Join(append([]string{v.Err}, problems...), " ")
	}
	return v
}
