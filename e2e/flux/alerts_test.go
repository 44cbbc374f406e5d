package flux

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/testenv"
)

// A Flux Alert on Terraform objects delivers, through the real
// notification-controller to a generic webhook, every moment a person acts
// on: a plan waiting for approval, an apply, drift found, a failure, the
// destroy of a deletion. Each notification carries the revision and
// Landform's metadata (plan id, +add ~change -destroy, drift; the
// provider delivers the keys without their infra.landform.dev/ prefix),
// and none
// carries the value of a variable from a Secret or of a sensitive output.
func TestAlertsReachAFluxProvider(t *testing.T) {
	s := newScenario(t, "alerts")
	g := NewWithT(t)
	hook := newWebhook(t)

	provider := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "notification.toolkit.fluxcd.io/v1beta3", "kind": "Provider",
		"metadata": map[string]any{"namespace": s.ns, "name": "webhook"},
		"spec":     map[string]any{"type": "generic", "address": hook.url},
	}}
	alert := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "notification.toolkit.fluxcd.io/v1beta3", "kind": "Alert",
		"metadata": map[string]any{"namespace": s.ns, "name": "terraform"},
		"spec": map[string]any{
			"providerRef":   map[string]any{"name": "webhook"},
			"eventSeverity": "info",
			"eventSources":  []any{map[string]any{"kind": infrav1.TerraformKind, "name": "*"}},
		},
	}}
	g.Expect(s.c.Create(s.ctx, provider)).To(Succeed())
	g.Expect(s.c.Create(s.ctx, alert)).To(Succeed(), "the dev environment's Alert CRD accepts kind Terraform")

	const secretVar = "alert-Secret-Value-7f3a"
	g.Expect(s.c.Create(s.ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "creds"},
		StringData: map[string]string{"password": secretVar},
	})).To(Succeed())
	path := filepath.Join(t.TempDir(), "alerts.txt")
	tf := fileModule(s.ns, "alerts", path, "hello")
	tf.Spec.ApprovePlan = ""
	tf.Spec.Interval = metav1.Duration{Duration: 5 * time.Second}
	tf.Spec.VarsFrom = []infrav1.VarsReference{{Kind: "Secret", Name: "creds", VarsKeys: []string{"password:sensitive_content"}}}
	tf.Spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{Name: "alerts-outputs", Outputs: []string{"secret", "path"}}
	g.Expect(s.c.Create(s.ctx, tf)).To(Succeed())

	// A plan waits for approval.
	var obj *infrav1.Terraform
	s.eventually("a plan waits for approval", func(g Gomega) {
		obj = s.terraform(g, tf.Name)
		g.Expect(obj.PendingPlan()).NotTo(BeEmpty(), testenv.Describe(obj))
	})
	first := obj.PendingPlan()
	revision := obj.Status.Plan.Revision
	g.Expect(revision).NotTo(BeEmpty())
	pending := hook.expect(t, "plan waiting for approval", func(e eventv1.Event) bool {
		return e.Reason == infrav1.PlanPendingReason && e.Metadata["plan"] == first
	})
	g.Expect(pending.Severity).To(Equal(eventv1.EventSeverityInfo))
	g.Expect(pending.Message).To(ContainSubstring(infrav1.ApproveAnnotation + "=" + first))
	g.Expect(pending.ReportingController).To(Equal("landform-controller"))
	g.Expect(pending.InvolvedObject.Kind).To(Equal(infrav1.TerraformKind))
	g.Expect(pending.InvolvedObject.Name).To(Equal(tf.Name))
	g.Expect(pending.Metadata).To(HaveKeyWithValue("revision", revision))
	g.Expect(pending.Metadata).To(HaveKeyWithValue("add", "1"))
	g.Expect(pending.Metadata).To(HaveKeyWithValue("change", "0"))
	g.Expect(pending.Metadata).To(HaveKeyWithValue("destroy", "0"))

	// Approved: applied.
	s.approve(tf.Name, first)
	applied := hook.expect(t, "plan applied", func(e eventv1.Event) bool {
		return e.Reason == infrav1.AppliedReason && e.Metadata["plan"] == first
	})
	g.Expect(applied.Message).To(Equal("applied plan " + first + ": +1 ~0 -0; wrote 2 outputs to Secret alerts-outputs"))
	g.Expect(applied.Metadata).To(HaveKeyWithValue("revision", revision))
	g.Expect(applied.Metadata).To(HaveKeyWithValue("add", "1"))
	s.eventually("the outputs are written", func(g Gomega) {
		g.Expect(string(s.secret(g, "alerts-outputs").Data["secret"])).To(Equal(secretVar), "the secret value was used")
	})

	// The file changed behind Landform's back: drift found by the next
	// check, its repair waiting for approval.
	g.Expect(os.WriteFile(path, []byte("changed by hand"), 0o644)).To(Succeed())
	drift := hook.expect(t, "drift detected", func(e eventv1.Event) bool {
		return e.Reason == infrav1.DriftDetectedReason
	})
	g.Expect(drift.Severity).To(Equal(eventv1.EventSeverityError))
	g.Expect(drift.Metadata).To(HaveKeyWithValue("drift", "true"))
	g.Expect(drift.Metadata).To(HaveKeyWithValue("revision", revision))
	repair := drift.Metadata["plan"]
	g.Expect(repair).NotTo(BeEmpty())
	g.Expect(drift.Message).To(ContainSubstring(repair))
	g.Expect(drift.Metadata["add"]+drift.Metadata["change"]).NotTo(Equal("00"), "the drift plan changes something")
	s.approve(tf.Name, repair)
	hook.expect(t, "drift repaired", func(e eventv1.Event) bool {
		return e.Reason == infrav1.AppliedReason && e.Metadata["plan"] == repair &&
			e.Metadata["drift"] == "false"
	})

	// A variable terraform refuses: the plan fails.
	s.setContent(tf.Name, map[string]any{"not": "a string"})
	failed := hook.expect(t, "a failed run", func(e eventv1.Event) bool {
		return e.Severity == eventv1.EventSeverityError && strings.Contains(e.Message, "plan run") && strings.Contains(e.Message, "failed")
	})
	g.Expect(failed.Metadata).To(HaveKey("revision"))
	g.Expect(failed.Metadata).To(HaveKeyWithValue("run", HavePrefix("run-")), "the run in the metadata")
	g.Expect(failed.Message).NotTo(ContainSubstring(failed.Metadata["run"]), "not in the message, which notification-controller's duplicate filter keys on")

	// Back to a good variable, then deleted: the destroy is done.
	s.setContent(tf.Name, "hello")
	s.eventually("Ready again", func(g Gomega) {
		cur := s.terraform(g, tf.Name)
		g.Expect(conditions.IsReady(cur)).To(BeTrue(), testenv.Describe(cur))
	})
	g.Expect(s.c.Delete(s.ctx, tf)).To(Succeed())
	destroyed := hook.expect(t, "destroy done", func(e eventv1.Event) bool {
		return e.Reason == infrav1.DeletingReason && strings.HasPrefix(e.Message, "destroyed the resources")
	})
	g.Expect(destroyed.Metadata).To(HaveKeyWithValue("revision", revision))
	s.eventually("the object is gone", func(g Gomega) { g.Expect(s.gone(g, &infrav1.Terraform{ObjectMeta: tf.ObjectMeta})).To(BeTrue()) })

	// No secret value in any notification.
	for i, body := range hook.bodies() {
		g.Expect(body).NotTo(ContainSubstring(secretVar), "notification %d", i)
	}
}

// approve annotates Terraform name with the plan id to apply.
func (s *scenario) approve(name, id string) {
	s.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, infrav1.ApproveAnnotation, id)
	tf := &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name}}
	if err := s.c.Patch(s.ctx, tf, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		s.t.Fatal(err)
	}
}

// setContent sets the content variable of Terraform name, whose plans
// apply without approval from then on.
func (s *scenario) setContent(name string, content any) {
	s.t.Helper()
	s.eventually("spec updated", func(g Gomega) {
		tf := s.terraform(g, name)
		for i := range tf.Spec.Vars {
			if tf.Spec.Vars[i].Name == "content" {
				tf.Spec.Vars[i] = variable("content", content)
			}
		}
		tf.Spec.ApprovePlan = infrav1.ApprovePlanAuto
		g.Expect(s.c.Update(s.ctx, tf)).To(Succeed())
	})
}

// webhook is a generic Provider's endpoint: it keeps every notification.
type webhook struct {
	url string
	mu  sync.Mutex
	raw []string
}

func newWebhook(t *testing.T) *webhook {
	h := &webhook{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.raw = append(h.raw, string(b))
		h.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL
	return h
}

func (h *webhook) bodies() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.raw...)
}

// expect waits for a notification that match accepts and returns it.
func (h *webhook) expect(t *testing.T, what string, match func(eventv1.Event) bool) eventv1.Event {
	t.Helper()
	var found eventv1.Event
	NewWithT(t).Eventually(func(g Gomega) {
		var seen []string
		for _, body := range h.bodies() {
			var e eventv1.Event
			g.Expect(json.Unmarshal([]byte(body), &e)).To(Succeed(), body)
			if match(e) {
				found = e
				return
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		g.Expect(seen).To(ContainElement("<"+what+">"), "notifications so far: %s", strings.Join(h.bodies(), "\n"))
	}).WithContext(context.Background()).WithTimeout(waitTimeout).WithPolling(time.Second).Should(Succeed(), "waiting for a notification: "+what)
	return found
}
