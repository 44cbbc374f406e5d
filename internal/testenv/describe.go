package testenv

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Describe is what obj says about itself, for a failure message: its
// generation and the one its status observed, the revisions and plan a
// Terraform or Kustomization applied, a source's artifact, its conditions,
// and its finalizers once it is being deleted. It reads any object, typed
// or unstructured, by the field names Landform and Flux share.
func Describe(obj client.Object) string {
	var m map[string]any
	if u, ok := obj.(*unstructured.Unstructured); ok {
		m = u.Object
	} else {
		var err error
		if m, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err != nil {
			return fmt.Sprintf("generation %d (status unreadable: %v)", obj.GetGeneration(), err)
		}
	}
	str := func(fields ...string) string {
		v, _, _ := unstructured.NestedFieldNoCopy(m, append([]string{"status"}, fields...)...)
		if v == nil {
			return ""
		}
		return fmt.Sprint(v)
	}
	observed, _, _ := unstructured.NestedInt64(m, "status", "observedGeneration")
	parts := []string{fmt.Sprintf("generation %d observed %d", obj.GetGeneration(), observed)}
	if rev := str("lastAppliedRevision"); rev != "" || str("lastAppliedPlan") != "" {
		applied := "applied " + rev
		if plan := str("lastAppliedPlan"); plan != "" {
			applied += " (plan " + plan + ")"
		}
		if attempted := str("lastAttemptedRevision"); attempted != "" && attempted != rev {
			applied += ", attempted " + attempted
		}
		parts = append(parts, applied)
	}
	if id := str("plan", "id"); id != "" {
		plan := fmt.Sprintf("plan %s pending=%q rev %s +%s ~%s -%s", id, str("plan", "pending"), str("plan", "revision"),
			or0(str("plan", "add")), or0(str("plan", "change")), or0(str("plan", "destroy")))
		if str("plan", "isDrift") == "true" {
			plan += " (drift)"
		}
		parts = append(parts, plan)
	}
	if action := str("run", "action"); action != "" {
		parts = append(parts, fmt.Sprintf("run %s in flight (%s)", action, str("run", "id")))
	}
	if rev := str("artifact", "revision"); rev != "" {
		parts = append(parts, "artifact "+rev)
	}
	conds, _, _ := unstructured.NestedSlice(m, "status", "conditions")
	for _, c := range conds {
		c, _ := c.(map[string]any)
		parts = append(parts, fmt.Sprintf("%v=%v (%v: %v)", c["type"], c["status"], c["reason"], c["message"]))
	}
	if ts := obj.GetDeletionTimestamp(); ts != nil {
		parts = append(parts, fmt.Sprintf("deleting since %s, finalizers %v", ts.UTC().Format("15:04:05"), obj.GetFinalizers()))
	}
	return strings.Join(parts, "; ")
}

// or0 is s, or "0" for a zero value omitted from the status.
func or0(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

// Events are the messages of the events about obj with reason (every
// reason when empty), oldest first as the API server lists them. An
// object with a UID matches by UID, so that the events of an earlier
// object of the same name, which linger, do not count; one given by name
// alone matches by namespace and name.
func Events(ctx context.Context, c client.Reader, obj client.Object, reason string) ([]string, error) {
	var list corev1.EventList
	if err := c.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil, err
	}
	var msgs []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name != obj.GetName() || (reason != "" && e.Reason != reason) {
			continue
		}
		if uid := obj.GetUID(); uid != "" && e.InvolvedObject.UID != uid {
			continue
		}
		if kind := obj.GetObjectKind().GroupVersionKind().Kind; kind != "" && e.InvolvedObject.Kind != kind {
			continue
		}
		msgs = append(msgs, e.Message)
	}
	return msgs, nil
}

// Poll calls check every interval until it returns true, returns an error
// other than NotFound, or timeout passes; the error then carries check's
// last description of what it saw (Describe). A NotFound error is that
// description: the object may be on its way.
func Poll(ctx context.Context, timeout, interval time.Duration, what string, check func() (bool, string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		ok, desc, err := check()
		switch {
		case ok:
			return nil
		case err != nil && !apierrors.IsNotFound(err):
			return fmt.Errorf("waiting for %s: %w", what, err)
		case err != nil:
			desc = err.Error()
		}
		last = desc
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after %s waiting for %s; last seen: %s", timeout, what, last)
		case <-time.After(interval):
		}
	}
}

// WaitFor polls obj until check accepts it (Poll), describing it
// meanwhile, and returns it as check last saw it.
func WaitFor[T client.Object](ctx context.Context, c client.Reader, obj T, timeout, interval time.Duration, what string, check func(T) bool) (T, error) {
	cur := obj.DeepCopyObject().(T)
	err := Poll(ctx, timeout, interval, fmt.Sprintf("%s %s: %s", kindOf(obj), obj.GetName(), what), func() (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
			return false, "", err
		}
		return check(cur), Describe(cur), nil
	})
	return cur, err
}

// WaitGone polls until obj no longer exists (Poll), describing it
// meanwhile: a finalizer or a destroy that does not finish shows in the
// error.
func WaitGone(ctx context.Context, c client.Reader, obj client.Object, timeout, interval time.Duration) error {
	cur := obj.DeepCopyObject().(client.Object)
	return Poll(ctx, timeout, interval, fmt.Sprintf("%s %s to be gone", kindOf(obj), obj.GetName()), func() (bool, string, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		return false, Describe(cur), nil
	})
}

// DeleteAndWait deletes obj, when it exists, and waits until it is gone
// (WaitGone): a Terraform object's destroy has run.
func DeleteAndWait(ctx context.Context, c client.Client, obj client.Object, timeout, interval time.Duration) error {
	if err := c.Delete(ctx, obj); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("deleting %s %s: %w", kindOf(obj), obj.GetName(), err)
	}
	return WaitGone(ctx, c, obj, timeout, interval)
}

// kindOf is obj's kind, from its type where its TypeMeta is empty.
func kindOf(obj client.Object) string {
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	return reflect.Indirect(reflect.ValueOf(obj)).Type().Name()
}
