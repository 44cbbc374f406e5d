package controllers

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	helper "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/events"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/metrics"
	"github.com/landform-dev/landform/internal/outcome"
)

// ControllerName is the source of Landform's events: the Kubernetes event
// source and the reportingController notification-controller sees.
const ControllerName = "landform-controller"

// Event metadata keys. notification-controller forwards only metadata under
// the object's API group, so every key is infra.landform.dev/<key>; the
// revision is Flux's own key, which it also uses to tell repeated events
// apart and which commit-status providers read.
var (
	revisionAnnotation = metadataKey(eventv1.MetaRevisionKey)
	planAnnotation     = metadataKey("plan")
	addAnnotation      = metadataKey("add")
	changeAnnotation   = metadataKey("change")
	destroyAnnotation  = metadataKey("destroy")
	replaceAnnotation  = metadataKey("replace")
	driftAnnotation    = metadataKey("drift")
	runAnnotation      = metadataKey("run")
	// commitStatusAnnotation marks the event that says how a reconcile
	// ended (finished): since notification-controller 1.8 a commit-status
	// provider (github, gitlab, gitea, bitbucket, azuredevops) drops
	// every other event but errors, and a chat provider drops this one.
	commitStatusAnnotation = metadataKey(eventv1.MetaCommitStatusKey)
	// tokenAnnotation tells notification-controller's duplicate filter
	// (object, message, revision and this token, five minutes) the
	// finished event from another event with the same message: a plan
	// waiting for approval says the same in both.
	tokenAnnotation = metadataKey(eventv1.MetaTokenKey)
)

func metadataKey(k string) string { return infrav1.GroupVersion.Group + "/" + k }

// reporter tells what happened to an object: events on it (a Kubernetes
// event and, with --events-addr, at notification-controller) and its
// metrics. Nil tells nothing.
type reporter struct {
	recorder record.EventRecorder
	// notifier posts to notification-controller alone (NewNotifier); nil
	// without --events-addr.
	notifier record.EventRecorder
	metrics  helper.Metrics
	// told is the last ending each object's finished event told, by
	// namespace and name (the ending holds the UID, so that an object
	// created again under the name is told afresh): a Reconcile that finds
	// the object gone forgets it by the only key it has, the name.
	told sync.Map
}

// Event records an event, annotated with the revision and drift.
// Messages never carry values: only ids, counts and names (and errors
// redacted by the runner's redactor).
func (rep *reporter) Event(obj *infrav1.Terraform, revision, eventType, reason, format string, args ...any) {
	rep.PlanEvent(obj, "", revision, eventType, reason, format, args...)
}

// PlanEvent is Event about plan id: it also carries the plan's id and, when
// status summarises that plan, its +add ~change -destroy counts and how
// many of them are replacements.
func (rep *reporter) PlanEvent(obj *infrav1.Terraform, id, revision, eventType, reason, format string, args ...any) {
	rep.annotated(obj, eventMetadata(obj, id, revision), eventType, reason, format, args...)
}

// RunEvent is PlanEvent about run, whose id goes in the metadata (run),
// not in the message: a failure retried the same way, each time by a new
// run, is then the same event, which notification-controller forwards once
// per five minutes (its duplicate filter keys on the message) and a
// Kubernetes Event counts, as Flux's controllers' retried failures are.
func (rep *reporter) RunEvent(obj *infrav1.Terraform, run *infrav1.RunStatus, eventType, reason, format string, args ...any) {
	m := eventMetadata(obj, run.Plan, run.Revision)
	m[runAnnotation] = run.ID
	rep.annotated(obj, m, eventType, reason, format, args...)
}

// annotated records the event with metadata m.
func (rep *reporter) annotated(obj *infrav1.Terraform, m map[string]string, eventType, reason, format string, args ...any) {
	if rep == nil || rep.recorder == nil {
		return
	}
	rep.recorder.AnnotatedEventf(obj, m, eventType, reason, "%s", redacted(obj, eventType, reason, fmt.Sprintf(format, args...)))
}

// ending is how a reconcile ended, as far as a commit status tells:
// Ready's status and reason, and the revision attempted, of the object
// with uid.
type ending struct {
	uid                            types.UID
	status, reason, revision, plan string
}

// endingOf is obj's ending as it stands; a preview's also has its plan,
// which a new state of its target changes on the same revision.
func endingOf(obj *infrav1.Terraform) ending {
	e := ending{uid: obj.UID, revision: obj.Status.LastAttemptedRevision}
	if p := obj.Status.Plan; obj.IsPreview() && p != nil {
		e.plan = p.ID
	}
	if c := conditions.Get(obj, meta.ReadyCondition); c != nil {
		e.status, e.reason = string(c.Status), c.Reason
	}
	return e
}

// finished records, with commit_status: update, how a reconcile ended,
// when it ended differently from the last one told (Ready's status or
// reason, or the revision, changed: a failure retried the same way, or a
// drift check that changes nothing, is told once; a restarted controller
// tells the ending it finds once more): applied, or nothing to change (Normal,
// ReconciliationSucceeded); a plan waiting for approval (Normal,
// Progressing, which a commit status shows as pending); a failure or a
// stall (Warning, its reason). Other waits (a dependency, a lock) and
// runs under way are no result, and a deletion is no commit's. As
// kustomize-controller's "Reconciliation finished", it is the event a
// commit status shows; its message is Ready's, which carries no value.
func (rep *reporter) finished(obj *infrav1.Terraform, o outcome.Outcome) {
	if rep == nil || rep.recorder == nil {
		return
	}
	key := client.ObjectKeyFromObject(obj)
	if !obj.DeletionTimestamp.IsZero() {
		rep.forget(key)
		return
	}
	ready, now := conditions.Get(obj, meta.ReadyCondition), endingOf(obj)
	if told, ok := rep.told.Load(key); ready == nil || obj.Spec.Suspend || now.revision == "" || ok && told.(ending) == now {
		return
	}
	eventType, reason, message := corev1.EventTypeNormal, ready.Reason, ready.Message
	switch o.Kind {
	case outcome.Succeeded:
		if obj.IsPreview() {
			reason, message = previewEnding(obj)
		}
	case outcome.Waiting:
		if o.Reason != infrav1.PlanPendingReason && o.Reason != infrav1.DestructivePlanPendingReason {
			return
		}
		reason = meta.ProgressingReason
	case outcome.Stalled, outcome.Retrying:
		eventType = corev1.EventTypeWarning
	default:
		return
	}
	rep.told.Store(key, now)
	// One Kubernetes event per thing a person needs to know: a success
	// (Applied, NoChanges, OutputsWritten, ...) or a plan waiting for
	// approval (PlanPending) was told by its own event, so its ending is
	// for commit statuses alone and goes to notification-controller
	// without a second Kubernetes event. A failure's ending stays one: a
	// stall (VarsNotFound, SourceNotFound, ...) has no event of its own.
	to := rep.recorder
	if eventType == corev1.EventTypeNormal {
		to = rep.notifier
	}
	if to == nil {
		return
	}
	md := eventMetadata(obj, obj.PendingPlan(), now.revision)
	md[commitStatusAnnotation] = eventv1.MetaCommitStatusUpdateValue
	md[tokenAnnotation] = "finished"
	to.AnnotatedEventf(obj, md, eventType, reason, "%s", redacted(obj, eventType, reason, message))
}

// NewNotifier posts events to notification-controller at addr (Flux's
// events.Recorder) without recording Kubernetes events; nil when addr is
// empty.
func NewNotifier(scheme *runtime.Scheme, log logr.Logger, addr string) (record.EventRecorder, error) {
	if addr == "" {
		return nil, nil
	}
	return events.NewRecorderForScheme(scheme, noKubernetesEvents{}, log, addr, ControllerName)
}

// noKubernetesEvents records nothing: the Kubernetes half of a notifier.
type noKubernetesEvents struct{}

func (noKubernetesEvents) Event(runtime.Object, string, string, string)          {}
func (noKubernetesEvents) Eventf(runtime.Object, string, string, string, ...any) {}
func (noKubernetesEvents) AnnotatedEventf(runtime.Object, map[string]string, string, string, string, ...any) {
}

// forget drops what was told of the object key names: it was deleted.
func (rep *reporter) forget(key types.NamespacedName) {
	if rep != nil {
		rep.told.Delete(key)
	}
}

// eventMetadata is an event's metadata: names, ids, counts and booleans
// only; a preview's every event names the object it previews.
func eventMetadata(obj *infrav1.Terraform, id, revision string) map[string]string {
	m := map[string]string{}
	if revision != "" {
		m[revisionAnnotation] = revision
	}
	if id != "" {
		m[planAnnotation] = id
		if p := obj.Status.Plan; p != nil && p.ID == id {
			m[addAnnotation] = strconv.Itoa(int(p.Add))
			m[changeAnnotation] = strconv.Itoa(int(p.Change))
			m[destroyAnnotation] = strconv.Itoa(int(p.Destroy))
			m[replaceAnnotation] = strconv.Itoa(int(p.Replace))
		}
	}
	if c := conditions.Get(obj, infrav1.DriftedCondition); c != nil && c.Status != metav1.ConditionUnknown {
		m[driftAnnotation] = strconv.FormatBool(c.Status == metav1.ConditionTrue)
	}
	if obj.IsPreview() {
		m[previewAnnotation] = previewName(obj)
	}
	return m
}

// reconciled updates the per-object gauges, the reconcile histogram and
// Flux's gotk_reconcile_* series, at the end of every reconcile.
// Flux's series go through fluxcd/pkg/runtime's controller.Metrics, which
// also drops them once the object is deleted.
func (rep *reporter) reconciled(ctx context.Context, obj *infrav1.Terraform, o outcome.Outcome, start time.Time) {
	if rep == nil {
		return
	}
	metrics.ObserveReconcile(o.Metric(), time.Since(start))
	rep.metrics.RecordDuration(ctx, obj, start)
	rep.metrics.RecordSuspend(ctx, obj, obj.Spec.Suspend)
	rep.metrics.RecordReadiness(ctx, obj)
	rep.metrics.RecordReconciling(ctx, obj)
	rep.metrics.RecordStalled(ctx, obj)
	if rep.metrics.IsDelete(obj) {
		metrics.ForgetObject(obj.Namespace, obj.Name)
		return
	}
	metrics.SetObjectState(obj.Namespace, obj.Name, obj.PendingPlan() != "", conditions.IsTrue(obj, infrav1.DriftedCondition))
}
