package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestGenericName(t *testing.T) {
	for _, tc := range []struct{ name, obj, want string }{
		{"one-1", "one-1", "<obj>"},
		{"tfstate-default-one-1", "one-1", "tfstate-default-<obj>"},
		{"lock-tfstate-default-one-1", "one-1", "lock-tfstate-default-<obj>"},
		{"one-1-outputs", "one-1", "<obj>-outputs"},
		{"one-1.18a7c3f2d1e4b5a6", "one-1", "<obj>.<time>"},
		{"one-10", "one-1", "one-10"},
		{"one-10-outputs", "one-1", "one-10-outputs"},
		{"someone-1", "one-1", "someone-1"},
		{"one-1-plan-one-1", "one-1", "<obj>-plan-<obj>"},
		{"landform-controller.infra.landform.dev", "one-1", "landform-controller.infra.landform.dev"},
	} {
		if got := genericName(tc.name, tc.obj); got != tc.want {
			t.Errorf("genericName(%q, %q) = %q, want %q", tc.name, tc.obj, got, tc.want)
		}
	}
}

func TestWriter(t *testing.T) {
	for ua, want := range map[string]string{
		"landform-controller/v0.0.0 (linux/amd64) kubernetes/$Format":                 "landform-controller",
		"landform-controller/v0.0.0 (linux/amd64) kubernetes/$Format/leader-election": "landform-controller",
		"landform-runner":                                            "landform-runner",
		"OpenTofu/1.10.6 (+https://opentofu.org)":                    "tofu",
		"bench/v0.0.0 (linux/amd64) kubernetes/$Format":              "bench harness",
		"kube-apiserver/v1.34.1 (linux/amd64) kubernetes/abcdef":     "kube-apiserver",
		"kube-controller-manager/v1.34.1 (linux/amd64) kubernetes/x": "kube-controller-manager",
		"": "(none)",
	} {
		if got := writer(ua); got != want {
			t.Errorf("writer(%q) = %q, want %q", ua, got, want)
		}
	}
}

// auditLine is one audit event as the API server logs it.
func auditLine(id, stage, verb, ua, resource, sub, ns, name string, code int, rv string, at time.Time) string {
	resp := ""
	if rv != "" {
		resp = `,"responseObject":{"kind":"X","metadata":{"resourceVersion":"` + rv + `"}}`
	}
	return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"` + id + `","stage":"` + stage +
		`","verb":"` + verb + `","user":{"username":"admin"},"userAgent":"` + ua + `","objectRef":{"resource":"` + resource +
		`","subresource":"` + sub + `","namespace":"` + ns + `","name":"` + name + `"},"responseStatus":{"code":` + strconv.Itoa(code) + `}` + resp +
		`,"requestReceivedTimestamp":"` + at.UTC().Format("2006-01-02T15:04:05.000000Z07:00") + `"}`
}

const (
	uaCtrl   = "landform-controller/v0.0.0 (linux/amd64) kubernetes/$Format"
	uaRunner = "landform-runner"
	uaBench  = "bench/v0.0.0 (linux/amd64) kubernetes/$Format"
	uaTofu   = "OpenTofu/1.10.6 (+https://opentofu.org)"
	uaAPI    = "kube-apiserver/v1.34.1 (linux/amd64) kubernetes/abc"
)

func TestReadAuditLogAndObjectWrites(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	lines := []string{
		// Before the first object: the harness's setup, not counted.
		auditLine("a0", "ResponseComplete", "create", uaBench, "gitrepositories", "", "bench-one", "repo", 201, "5", ms(-100)),
		auditLine("a1", "RequestReceived", "create", uaBench, "terraforms", "", "bench-one", "one-0", 0, "", ms(0)),
		auditLine("a1", "ResponseComplete", "create", uaBench, "terraforms", "", "bench-one", "one-0", 201, "10", ms(0)),
		auditLine("a2", "ResponseComplete", "patch", uaCtrl, "terraforms", "", "bench-one", "one-0", 200, "11", ms(20)),
		auditLine("a3", "ResponseComplete", "patch", uaCtrl, "terraforms", "status", "bench-one", "one-0", 200, "12", ms(30)),
		// The same resourceVersion again: a write that changed nothing.
		auditLine("a4", "ResponseComplete", "patch", uaCtrl, "terraforms", "status", "bench-one", "one-0", 200, "12", ms(40)),
		// Logged twice: counted once.
		auditLine("a4", "ResponseComplete", "patch", uaCtrl, "terraforms", "status", "bench-one", "one-0", 200, "12", ms(40)),
		auditLine("a5", "ResponseComplete", "update", uaCtrl, "terraforms", "status", "bench-one", "one-0", 409, "", ms(50)),
		// A Secret: no body, cannot tell.
		auditLine("a6", "ResponseComplete", "create", uaRunner, "secrets", "", "bench-one", "tfstate-default-one-0", 201, "", ms(60)),
		auditLine("a7", "ResponseComplete", "update", uaRunner, "secrets", "", "bench-one", "tfstate-default-one-0", 200, "", ms(70)),
		// The engine writes as the state's ServiceAccount.
		strings.Replace(auditLine("a7b", "ResponseComplete", "update", uaTofu, "leases", "", "bench-one", "lock-tfstate-default-one-0", 200, "30", ms(75)),
			`"username":"admin"`, `"username":"system:serviceaccount:bench-one:landform-state-one-0"`, 1),
		// Outside the namespace: the controller's Lease is leader
		// election, the API server's own not counted, the controller's
		// Event charged.
		auditLine("a8", "ResponseComplete", "update", uaCtrl, "leases", "", "kube-system", "landform-controller.infra.landform.dev", 200, "13", ms(80)),
		auditLine("a9", "ResponseComplete", "update", uaAPI, "leases", "", "kube-system", "apiserver-x", 200, "14", ms(90)),
		auditLine("a10", "ResponseComplete", "create", uaCtrl, "events", "", "default", "something.18a7c3f2d1e4b5a6", 201, "15", ms(95)),
		auditLine("b1", "ResponseComplete", "create", uaBench, "terraforms", "", "bench-one", "one-1", 201, "20", ms(1000)),
		// Late, after the next create, but named after the first object.
		auditLine("b2", "ResponseComplete", "create", uaCtrl, "events", "", "bench-one", "one-0.18a7c3f2d1e4b5a6", 201, "21", ms(1010)),
		auditLine("b3", "ResponseComplete", "patch", uaCtrl, "terraforms", "status", "bench-one", "one-1", 200, "22", ms(1020)),
		// After the end.
		auditLine("b4", "ResponseComplete", "patch", uaCtrl, "terraforms", "status", "bench-one", "one-1", 200, "23", ms(5000)),
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	events, dups, err := readAuditLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if dups != 1 {
		t.Errorf("duplicates = %d, want 1", dups)
	}
	samples := []writeSample{{name: "one-0", created: ms(0), done: ms(900)}, {name: "one-1", created: ms(1000), done: ms(1500)}}
	perSample, leader, notCounted := objectWrites(events, "bench-one", samples, ms(2000))
	if leader != 1 {
		t.Errorf("leader election writes = %d, want 1", leader)
	}
	if diff := cmp.Diff(map[string]int{"kube-apiserver update leases": 1}, notCounted); diff != "" {
		t.Errorf("not counted (-want +got):\n%s", diff)
	}
	w := summarizeWrites(perSample, samples, "bench-one")
	wantFirst := []Write{
		{Millis: 0, Verb: "create", Resource: "terraforms", Name: "<obj>", Writer: "bench harness", User: "admin", Code: 201, Changed: "yes"},
		{Millis: 20, Verb: "patch", Resource: "terraforms", Name: "<obj>", Writer: "landform-controller", User: "admin", Code: 200, Changed: "yes"},
		{Millis: 30, Verb: "patch", Resource: "terraforms/status", Name: "<obj>", Writer: "landform-controller", User: "admin", Code: 200, Changed: "yes"},
		{Millis: 40, Verb: "patch", Resource: "terraforms/status", Name: "<obj>", Writer: "landform-controller", User: "admin", Code: 200, Changed: "no"},
		{Millis: 50, Verb: "update", Resource: "terraforms/status", Name: "<obj>", Writer: "landform-controller", User: "admin", Code: 409, Changed: "no"},
		{Millis: 60, Verb: "create", Resource: "secrets", Name: "tfstate-default-<obj>", Writer: "landform-runner", User: "admin", Code: 201, Changed: "yes"},
		{Millis: 70, Verb: "update", Resource: "secrets", Name: "tfstate-default-<obj>", Writer: "landform-runner", User: "admin", Code: 200},
		{Millis: 75, Verb: "update", Resource: "leases", Name: "lock-tfstate-default-<obj>", Writer: "tofu", User: "system:serviceaccount:bench-one:landform-state-<obj>", Code: 200},
		{Millis: 95, Verb: "create", Resource: "events", Name: "default/something.<time>", Writer: "landform-controller", User: "admin", Code: 201, Changed: "yes"},
		{Millis: 1010, Verb: "create", Resource: "events", Name: "<obj>.<time>", Writer: "landform-controller", User: "admin", Code: 201, Changed: "yes"},
	}
	if diff := cmp.Diff(wantFirst, w.FirstSample); diff != "" {
		t.Errorf("first sample (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{10, 2}, w.WritesPerSample); diff != "" {
		t.Errorf("writes per sample (-want +got):\n%s", diff)
	}
	if w.WritesPerObject != 6 || w.FailedPerObject != 0.5 || w.UnchangedPerObject != 0.5 {
		t.Errorf("per object: %v writes, %v failed, %v unchanged; want 6, 0.5, 0.5", w.WritesPerObject, w.FailedPerObject, w.UnchangedPerObject)
	}
	if got := w.ByResource["terraforms/status"]; got["patch"] != 1.5 || got["update"] != 0.5 {
		t.Errorf("terraforms/status per object = %v, want patch 1.5, update 0.5", got)
	}
}

// A writes run replaces the report's writes only: the one it replaces is
// kept as before when it is of another revision, and the rest of the
// report is unchanged.
func TestMergeOneObjectWrites(t *testing.T) {
	r := &Report{Revision: "`abc`", Overhead: Overhead{RawMedian: 1.5}}
	first := &OneObjectWrites{Revision: "`aaa`", WritesPerObject: 30}
	r.mergeOneObjectWrites(first)
	if r.OneObjectWrites != first || r.OneObjectWritesBefore != nil {
		t.Fatalf("first merge: %+v, before %+v", r.OneObjectWrites, r.OneObjectWritesBefore)
	}
	again := &OneObjectWrites{Revision: "`aaa`", WritesPerObject: 31}
	r.mergeOneObjectWrites(again)
	if r.OneObjectWrites != again || r.OneObjectWritesBefore != nil {
		t.Fatalf("same revision: before should stay empty, got %+v", r.OneObjectWritesBefore)
	}
	after := &OneObjectWrites{Revision: "`bbb`", WritesPerObject: 20}
	r.mergeOneObjectWrites(after)
	if r.OneObjectWrites != after || r.OneObjectWritesBefore != again {
		t.Fatalf("new revision: got %+v, before %+v", r.OneObjectWrites, r.OneObjectWritesBefore)
	}
	if r.Revision != "`abc`" || r.Overhead.RawMedian != 1.5 {
		t.Errorf("the rest of the report changed: %+v", r)
	}
}

func TestOneObjectWritesMarkdown(t *testing.T) {
	before := &OneObjectWrites{Revision: "`aaa`", Samples: 2, WritesPerObject: 4,
		ByResource: map[string]map[string]float64{"terraforms/status": {"patch": 3}, "events": {"create": 1}}}
	after := &OneObjectWrites{Revision: "`bbb`", Samples: 2, WritesPerObject: 3,
		ByResource:  map[string]map[string]float64{"terraforms/status": {"patch": 2}, "secrets": {"create": 1}},
		FirstSample: []Write{{Millis: 12, Verb: "update", Resource: "terraforms/status", Name: "<obj>", Writer: "landform-controller", User: "admin", Code: 409, Changed: "no"}}}
	var b strings.Builder
	after.writeMarkdown(func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }, before)
	md := b.String()
	for _, want := range []string{
		"## API writes of one object's life (local runners)",
		"| resource | create | patch | all | before | change |",
		"| `events` | – | – | – | 1 | −1 |",
		"| `secrets` | 1 | – | 1 | – | +1 |",
		"| `terraforms/status` | – | 2 | 2 | 3 | −1 |",
		"| all | **1** | **2** | **3** | **4** | −1 |",
		"| 1 | 12 | update | `terraforms/status` | `<obj>` | landform-controller | `admin` | **409** | no |",
		"<details><summary>Before: `aaa`</summary>",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestMarkSecretWrites(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	write := func(name, verb string, at, code int) auditWrite {
		w := auditWrite{at: ms(at), verb: verb, resource: "secrets", namespace: "bench-one", name: name, code: code}
		if verb == "create" {
			w.changed = "yes"
		}
		return w
	}
	events := []auditWrite{
		write("a", "create", 0, 201), write("a", "patch", 100, 200), write("a", "patch", 200, 200),
		write("b", "create", 0, 201), write("b", "update", 100, 200),
		// Two versions after one write: which write made which is not told.
		write("c", "create", 0, 201), write("c", "patch", 100, 200), write("c", "patch", 200, 200), write("c", "patch", 300, 200),
		// A failed write is no version.
		write("d", "create", 0, 201), write("d", "update", 100, 409), write("d", "update", 150, 200),
		// The create seen with no version: not told.
		write("e", "create", 0, 201), write("e", "patch", 100, 200),
	}
	versions := map[string][]time.Time{
		"a": {ms(5), ms(205)},
		"b": {ms(5), ms(105)},
		"c": {ms(5), ms(150), ms(160)},
		"d": {ms(5), ms(155)},
		"e": {ms(105)},
	}
	markSecretWrites(events, "bench-one", versions)
	var got []string
	for _, w := range events {
		got = append(got, w.name+" "+w.verb+" "+w.changed)
	}
	want := []string{
		"a create yes", "a patch no", "a patch yes",
		"b create yes", "b update yes",
		"c create yes", "c patch ", "c patch ", "c patch ",
		"d create yes", "d update ", "d update yes",
		"e create yes", "e patch ",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// A write is charged to the sample its name names; a write to a runner
// Pod after that sample was done is of the Pod kept for reuse, serving the
// sample created last before it.
func TestWriteSampleOf(t *testing.T) {
	t0 := time.Unix(1000, 0)
	samples := []writeSample{
		{name: "one-0", created: t0, done: t0.Add(time.Second)},
		{name: "one-1", created: t0.Add(5 * time.Second), done: t0.Add(6 * time.Second)},
	}
	for _, c := range []struct {
		name string
		w    auditWrite
		want int
	}{
		{"its own Secret, later", auditWrite{at: t0.Add(5500 * time.Millisecond), resource: "secrets", name: "tfplan-one-0-0"}, 0},
		{"its Pod, during it", auditWrite{at: t0.Add(500 * time.Millisecond), resource: "pods/status", name: "one-0-runner-abcde"}, 0},
		{"its Pod reused for the next", auditWrite{at: t0.Add(5500 * time.Millisecond), resource: "pods", name: "one-0-runner-abcde"}, 1},
		{"the reused Pod's event", auditWrite{at: t0.Add(5500 * time.Millisecond), resource: "events", name: "one-0-runner-abcde.17a"}, 1},
		{"no name", auditWrite{at: t0.Add(5500 * time.Millisecond), resource: "leases", name: "other"}, 1},
	} {
		if got := writeSampleOf(c.w, samples); got != c.want {
			t.Errorf("%s: sample %d, want %d", c.name, got, c.want)
		}
	}
}
