package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/testenv"
	"github.com/landform-dev/landform/internal/ui"
)

// The UI list page's measurement: uiObjects objects in uiNamespaces
// namespaces, one warm-up request and uiSamples timed ones; the target is
// a median under uiTarget.
const (
	uiObjects    = 500
	uiNamespaces = 10
	uiSamples    = 5
	uiTarget     = time.Second
)

// UIList is `landform ui`'s list page (GET /) over uiObjects Terraform
// objects, each request timed from its start to the body's last byte.
type UIList struct {
	// Date and Revision are when and from what it was measured: a
	// BENCH_ONLY=ui run merges it into an earlier run's report.
	Date       string `json:"date"`
	Revision   string `json:"revision"`
	LoadStart  string `json:"loadAverageAtStart"`
	Objects    int    `json:"objects"`
	Namespaces int    `json:"namespaces"`
	// Kinds counts the objects by the row they make (uiKinds).
	Kinds         map[string]int `json:"objectsByKind"`
	WarmupSeconds float64        `json:"warmupSeconds"`
	Seconds       []float64      `json:"seconds"`
	MedianSeconds float64        `json:"medianSeconds"`
	MaxSeconds    float64        `json:"maxSeconds"`
	// Rows is the page's data-key rows; BodyBytes its size.
	Rows      int `json:"rows"`
	BodyBytes int `json:"bodyBytes"`
}

// The kinds of row the list page draws, and the share of objects of each:
// the controller's statuses as it writes them, so that the page renders
// every badge it has.
const (
	kindReady       = "ready"
	kindPending     = "plan pending"
	kindDestructive = "destructive plan held"
	kindApproved    = "approved and applying"
	kindDrifted     = "drifted"
	kindFailing     = "failing"
	kindSuspended   = "suspended"
	kindPreview     = "previews"
)

var uiKinds = []string{kindReady, kindPending, kindDestructive, kindApproved, kindDrifted, kindFailing, kindSuspended, kindPreview}

// uiKind is object i's kind: a tenth with a plan waiting (of those a third
// destructive and held, a third approved), 5% drifted, 5% failing, 2%
// suspended, 1% previews, the rest Ready.
func uiKind(i int) string {
	switch {
	case i%10 == 0:
		return []string{kindPending, kindDestructive, kindApproved}[i/10%3]
	case i%20 == 5:
		return kindDrifted
	case i%20 == 15:
		return kindFailing
	case i%50 == 7:
		return kindSuspended
	case i%100 == 33:
		return kindPreview
	}
	return kindReady
}

// uiMarkers are what the page shows for each kind's row but Ready's, as
// the list template writes it: the page must show each as many times as
// there are objects of the kinds counted.
var uiMarkers = []struct {
	html  string
	kinds []string
}{
	{`class="badge pending"`, []string{kindPending, kindApproved, kindPreview}},
	{`>approved</span>`, []string{kindApproved}},
	{`class="badge destructive"`, []string{kindDestructive}},
	{`<span class="badge drifted">`, []string{kindDrifted}},
	{`<span class="badge failing">`, []string{kindFailing}},
	{`<span class="badge suspended">`, []string{kindSuspended}},
	{`<span class="badge">preview</span>`, []string{kindPreview}},
}

func uiNamespace(i int) string { return fmt.Sprintf("bench-ui-%02d", i%uiNamespaces) }

// measureUIList creates the objects with c (no controller reconciles
// them: their status is written here), serves the UI acting with cfg,
// times GET / and deletes the objects.
func measureUIList(ctx context.Context, c client.Client, cfg *rest.Config) (*UIList, error) {
	u := &UIList{LoadStart: loadAvg(), Objects: uiObjects, Namespaces: uiNamespaces, Kinds: map[string]int{}}
	for i := range uiNamespaces {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: uiNamespace(i)}}); err != nil {
			return nil, err
		}
	}
	keys := make([]string, uiObjects)
	kind := map[string]string{}
	for i := range keys {
		keys[i] = fmt.Sprintf("%s/stack-%03d", uiNamespace(i), i)
		kind[keys[i]] = uiKind(i)
		u.Kinds[uiKind(i)]++
	}
	start := time.Now()
	if _, err := createAll(ctx, keys, func(ctx context.Context, ns, name string) error {
		return createUIObject(ctx, c, ns, name, kind[ns+"/"+name])
	}); err != nil {
		return nil, err
	}
	log("UI list page: created %d objects with their status in %.1fs", uiObjects, time.Since(start).Seconds())

	if err := u.measure(ctx, cfg); err != nil {
		return nil, err
	}
	log("UI list page: %d rows (%d KiB), median %.3fs, max %.3fs over %d requests (warm-up %.3fs)",
		u.Rows, u.BodyBytes>>10, u.MedianSeconds, u.MaxSeconds, len(u.Seconds), u.WarmupSeconds)

	// The objects have no finalizer (no controller saw them): deleting
	// them removes them at once. The namespaces stay, empty: envtest runs
	// no namespace controller to finish deleting them.
	for i := range uiNamespaces {
		if err := c.DeleteAllOf(ctx, &infrav1.Terraform{}, client.InNamespace(uiNamespace(i))); err != nil {
			return nil, fmt.Errorf("deleting the UI's objects: %w", err)
		}
	}
	var left infrav1.TerraformList
	if err := c.List(ctx, &left); err != nil {
		return nil, err
	}
	if len(left.Items) > 0 {
		return nil, fmt.Errorf("%d Terraform objects left after deleting the UI's", len(left.Items))
	}
	return u, nil
}

// measure serves the UI on loopback, lets a client in with the URL's
// token, and times GET /: one warm-up request, then uiSamples.
func (u *UIList) measure(ctx context.Context, cfg *rest.Config) error {
	s, err := ui.New(ui.Options{Config: cfg, Namespace: "default"})
	if err != nil {
		return err
	}
	l, err := s.Listen("127.0.0.1:0")
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- s.Serve(sctx, l) }()
	defer func() { cancel(); <-served }()

	jar, err := cookiejar.New(nil)
	if err != nil {
		return err
	}
	// Redirects are not followed: the token's 303 only sets the cookie,
	// and every page request is one request.
	hc := &http.Client{Jar: jar, Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if code, _, _, err := get(ctx, hc, s.URL()); err != nil {
		return err
	} else if code != http.StatusSeeOther {
		return fmt.Errorf("the UI's URL with its token answered %d, not 303", code)
	}
	root := strings.SplitN(s.URL(), "?", 2)[0]
	for i := range uiSamples + 1 {
		code, body, secs, err := get(ctx, hc, root)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("GET / answered %d: %.300s", code, body)
		}
		if err := u.check(body); err != nil {
			return err
		}
		if i == 0 {
			u.WarmupSeconds = secs
			continue
		}
		u.Seconds = append(u.Seconds, secs)
	}
	u.MedianSeconds, u.MaxSeconds = median(u.Seconds), percentile(u.Seconds, 100)
	return nil
}

// get GETs url with hc and returns the status, the body and the time
// from the request's start to the body's last byte.
func get(ctx context.Context, hc *http.Client, url string) (int, []byte, float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, 0, err
	}
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, 0, err
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	if _, err := io.Copy(&body, resp.Body); err != nil {
		return 0, nil, 0, fmt.Errorf("reading %s: %w", url, err)
	}
	return resp.StatusCode, body.Bytes(), time.Since(start).Seconds(), nil
}

// check fails unless the page has a row per object and each kind's badge
// on as many rows as there are objects of that kind.
func (u *UIList) check(body []byte) error {
	page := string(body)
	u.Rows, u.BodyBytes = strings.Count(page, "data-key="), len(body)
	if u.Rows != u.Objects {
		return fmt.Errorf("GET / has %d data-key rows for %d objects", u.Rows, u.Objects)
	}
	for _, m := range uiMarkers {
		want := 0
		for _, k := range m.kinds {
			want += u.Kinds[k]
		}
		if got := strings.Count(page, m.html); got != want {
			return fmt.Errorf("GET / shows %s %d times for %d objects of kinds %s", m.html, got, want, strings.Join(m.kinds, ", "))
		}
	}
	return nil
}

// createUIObject creates the bench's object ns/name as kind and writes the
// status the controller would have written for it.
func createUIObject(ctx context.Context, c client.Client, ns, name, kind string) error {
	obj := terraformObject(ns, name)
	sum := sha256.Sum256([]byte(ns + "/" + name))
	digest := hex.EncodeToString(sum[:])
	rev := "main@sha1:" + digest[:40]
	applied := "plan-" + digest[:10] + "-" + digest[10:22]
	pending := "plan-" + digest[:10] + "-" + digest[22:34]
	switch kind {
	case kindPending:
		obj.Spec.ApprovePlan = ""
	case kindApproved:
		obj.Spec.ApprovePlan = ""
		obj.Annotations = map[string]string{infrav1.ApproveAnnotation: pending}
	case kindSuspended:
		obj.Spec.Suspend = true
	case kindPreview:
		obj.Spec.ApprovePlan, obj.Spec.WriteOutputsToSecret = "", nil
		obj.Spec.Preview = &infrav1.PreviewSpec{StateFrom: &infrav1.PreviewTarget{Name: name + "-main"}}
	}
	if err := c.Create(ctx, obj); err != nil {
		return err
	}

	now := metav1.Now()
	planned := metav1.NewTime(now.Add(-3 * time.Minute))
	st := &obj.Status
	st.ObservedGeneration = obj.Generation
	st.LastAttemptedRevision, st.LastPlannedRevision, st.LastAppliedRevision, st.LastAppliedPlan = rev, rev, rev, applied
	st.AvailableOutputs = []string{"endpoint", "id", "security_group_id"}
	st.Plan = &infrav1.PlanStatus{ID: applied, Revision: rev, Digest: "sha256:" + digest, Add: 3, PlannedAt: &planned,
		Resources: []string{"landform_security_group.this", "terraform_data.config", "module.network.landform_security_group.egress"}}
	cond := func(typ string, status metav1.ConditionStatus, reason, format string, a ...any) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: fmt.Sprintf(format, a...),
			ObservedGeneration: obj.Generation, LastTransitionTime: now}
	}
	ready := cond(meta.ReadyCondition, metav1.ConditionTrue, infrav1.ReconciliationSucceededReason, "Applied revision: %s", rev)
	planCond := cond(infrav1.PlannedCondition, metav1.ConditionTrue, infrav1.PlannedWithChangesReason, "plan %s for revision %s: +3 ~0 -0", applied, rev)
	appliedCond := cond(infrav1.AppliedCondition, metav1.ConditionTrue, infrav1.AppliedReason, "applied plan %s for revision %s", applied, rev)
	outputs := cond(infrav1.OutputsWrittenCondition, metav1.ConditionTrue, infrav1.OutputsWrittenReason, "wrote 3 outputs to Secret %s-outputs", name)
	drift := cond(infrav1.DriftedCondition, metav1.ConditionFalse, infrav1.NoDriftReason, "no drift at %s", now.UTC().Format(time.RFC3339))
	extra := []metav1.Condition{}
	switch kind {
	case kindPending, kindDestructive, kindApproved:
		p := st.Plan
		p.ID, p.Pending, p.Add, p.Change = pending, pending, 1, 1
		p.Resources = []string{"landform_security_group.this", "terraform_data.config"}
		if kind == kindDestructive {
			p.Destroy, p.Replace, p.ResourcesToReplace = 1, 1, []string{"landform_security_group.this"}
		}
		counts := fmt.Sprintf("+%d ~%d -%d", p.Add, p.Change, p.Destroy)
		planCond = cond(infrav1.PlannedCondition, metav1.ConditionTrue, infrav1.PlannedWithChangesReason, "plan %s for revision %s: %s", pending, rev, counts)
		msg := fmt.Sprintf("plan %s (%s) waits for approval: annotate with %s=%s or set spec.approvePlan", pending, counts, infrav1.ApproveAnnotation, pending)
		ready = cond(meta.ReadyCondition, metav1.ConditionFalse, infrav1.PlanPendingReason, "%s", msg)
		switch kind {
		case kindDestructive:
			msg = fmt.Sprintf("plan %s (%s) replaces landform_security_group.this; approvePlan auto applies no such plan without a person, so it waits for approval: annotate with %s=%s or set spec.approvePlan to its id (spec.autoApproveDestructive: true applies such plans automatically)",
				pending, counts, infrav1.ApproveAnnotation, pending)
			planCond = cond(infrav1.PlannedCondition, metav1.ConditionTrue, infrav1.DestructivePlanPendingReason, "%s", msg)
			ready = cond(meta.ReadyCondition, metav1.ConditionFalse, infrav1.DestructivePlanPendingReason, "%s", msg)
		case kindApproved:
			ready = cond(meta.ReadyCondition, metav1.ConditionUnknown, infrav1.ProgressingReason, "applying plan %s", pending)
			extra = append(extra, cond(meta.ReconcilingCondition, metav1.ConditionTrue, infrav1.RunInProgressReason, "applying plan %s", pending))
		}
	case kindDrifted:
		drift = cond(infrav1.DriftedCondition, metav1.ConditionTrue, infrav1.DriftDetectedReason,
			"drift detected: +0 ~1 -0 in landform_security_group.this")
	case kindFailing:
		st.LastAttemptedRevision = "main@sha1:" + digest[24:64]
		ready = cond(meta.ReadyCondition, metav1.ConditionFalse, infrav1.PlanFailedReason,
			"plan failed: exit status 1: Error: Invalid reference on main.tf line 12: A reference to a resource type must be followed by at least one attribute access")
		planCond = cond(infrav1.PlannedCondition, metav1.ConditionFalse, infrav1.PlanFailedReason, "%s", ready.Message)
	case kindPreview:
		// A preview's plan stays pending: it is never applied.
		st.LastAppliedRevision, st.LastAppliedPlan = "", ""
		st.Plan.Pending = applied
		planCond = cond(infrav1.PlannedCondition, metav1.ConditionTrue, infrav1.PlannedWithChangesReason, "plan %s for revision %s: +3 ~0 -0", applied, rev)
		ready = cond(meta.ReadyCondition, metav1.ConditionTrue, infrav1.ReconciliationSucceededReason, "preview plan %s (+3 ~0 -0) made; a preview is never applied", applied)
		st.Conditions = append([]metav1.Condition{ready, planCond}, extra...)
		return c.Status().Update(ctx, obj)
	}
	st.Conditions = append([]metav1.Condition{ready, planCond, appliedCond, outputs, drift}, extra...)
	return c.Status().Update(ctx, obj)
}

// target is the list page's target: a median under uiTarget.
func (u *UIList) target() Target {
	met := u.MedianSeconds < uiTarget.Seconds()
	return Target{
		Name:     fmt.Sprintf("UI list page, %d objects", u.Objects),
		Want:     fmt.Sprintf("`GET /` under %.0f s (median, request to the body's last byte)", uiTarget.Seconds()),
		Measured: fmt.Sprintf("median %.3f s, max %.3f s over %d requests (%d rows, %d KiB)", u.MedianSeconds, u.MaxSeconds, len(u.Seconds), u.Rows, u.BodyBytes>>10),
		Met:      &met,
	}
}

// method is the measurement's item in the report's Method list.
func (u *UIList) method(p printer, n int) {
	p("%d. **UI list page**: %d Terraform objects in %d namespaces, created before the controller starts (no controller reconciles\n", n, u.Objects, u.Namespaces)
	p("   them) with the status the controller would write:\n   %s.\n", u.kindList())
	p("   `landform ui`'s server (`internal/ui`) acting with the harness's credentials, and a client let in with its token: `GET /`\n")
	p("   once to warm up, then %d times, each timed from the request to the body's last byte (one kept-alive connection) and\n", len(u.Seconds))
	p("   checked for a row per object and each kind's badge on as many rows. The objects are deleted after;\n")
	p("   `BENCH_ONLY=ui make bench` runs this measurement alone and merges it into docs/benchmarks.json.\n")
}

// kindList is "385 ready, 17 plan pending, ...".
func (u *UIList) kindList() string {
	var parts []string
	for _, k := range uiKinds {
		if n := u.Kinds[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	return strings.Join(parts, ", ")
}

// writeMarkdown is the measurement's section of docs/benchmarks.md.
func (u *UIList) writeMarkdown(p printer, r *Report) {
	p("\n## UI list page: %d objects\n\n", u.Objects)
	if u.Date != r.Date {
		p("Measured apart from the run above, on %s from %s by `BENCH_ONLY=ui make bench` (load average at start %s).\n\n", u.Date, u.Revision, u.LoadStart)
	}
	p("| | |\n|---|---|\n")
	p("| `GET /`: median / max | %.3f s / %.3f s |\n", u.MedianSeconds, u.MaxSeconds)
	p("| samples (s) | %s |\n", floatsMillis(u.Seconds))
	p("| warm-up request | %.3f s |\n", u.WarmupSeconds)
	p("| rows / page size | %d / %d KiB |\n", u.Rows, u.BodyBytes>>10)
}

// floatsMillis renders seconds to the millisecond: "0.123, 0.130".
func floatsMillis(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.3f", x)
	}
	return strings.Join(parts, ", ")
}

// runUIList is `BENCH_ONLY=ui make bench`: the UI list page alone on its
// own API server, merged into the existing report at o.outJSON (its other
// measurements kept) and rendered as o.outMD again. Without an existing
// report it writes nothing: a page of this one measurement would drop the
// others.
func runUIList(o options) error {
	if o.revision == "" {
		o.revision = gitRevision()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log("starting kube-apiserver and etcd")
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	c, err := client.New(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		return err
	}
	u, err := measureUIList(ctx, c, env.Config)
	if err != nil {
		return fmt.Errorf("UI list page: %w", err)
	}
	u.Date, u.Revision = time.Now().UTC().Format(time.RFC3339), o.revision
	t := u.target()
	log("target %s: %s: %s", t.Name, t.Measured, metWord(*t.Met))

	return mergeSection(o, "the UI list page", func(r *Report) { r.mergeUIList(u) })
}

// mergeSection merges one section measured alone (BENCH_ONLY) into the
// report at o.outJSON, applies the notes and renders it again; with no
// report there it writes nothing.
func mergeSection(o options, what string, merge func(*Report)) error {
	r, err := readReport(o.outJSON)
	if errors.Is(err, os.ErrNotExist) {
		log("no report at %s to merge into: run `make bench` once; nothing written", o.outJSON)
		return nil
	}
	if err != nil {
		return err
	}
	merge(r)
	notes, err := readNotes(o.notes)
	if err != nil {
		return err
	}
	r.applyNotes(notes)
	if err := writeReportFile(o.outJSON, r); err != nil {
		return err
	}
	log("merged %s into %s", what, o.outJSON)
	return render(o.outJSON, o.outMD, o.notes, false)
}

// mergeUIList puts u into r in place of r's own, and its target in place
// of r's (after the others when r has none): the rest of r is unchanged.
func (r *Report) mergeUIList(u *UIList) {
	r.UIList = u
	t := u.target()
	for i := range r.Targets {
		if r.Targets[i].Name == t.Name {
			r.Targets[i] = t
			return
		}
	}
	r.Targets = append(r.Targets, t)
}
