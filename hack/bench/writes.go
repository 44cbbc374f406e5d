package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/landform-dev/landform/internal/testenv"
)

// The API writes of one object's life (`BENCH_ONLY=writes make bench`):
// the one-object samples of the trivial module alone, on an API server
// that writes an audit log of every write. apiserver_request_total only
// counts writes; the log says which object each one wrote, who wrote it,
// when, with what answer, and whether it changed anything.

// auditPolicy logs every write and nothing else. The writes of Secrets
// and TokenRequests are logged without bodies, which keeps their data
// out of the log (and a CRD's, only large, with them); any other write
// with the object it answered, whose resourceVersion tells a write that
// changed nothing (the same as after the object's previous write) from
// one that did. Whether a Secret's write changed it is told by a watch
// instead (markSecretWrites).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
omitManagedFields: true
rules:
- level: Metadata
  resources:
  - {group: "", resources: ["secrets", "serviceaccounts/token"]}
  - {group: "apiextensions.k8s.io", resources: ["customresourcedefinitions"]}
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: RequestResponse
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

const (
	writesNamespace = "bench-one"
	writesPrefix    = "one"
	// writesSettle is the pause after each object is done, so that its
	// last writes (after the Ready the harness saw) land in its own
	// window rather than the next object's.
	writesSettle = 3 * time.Second
)

// OneObjectWrites is the API writes of one object's life, create to
// Ready with its outputs Secret, from the API server's audit log.
type OneObjectWrites struct {
	// Date and Revision are when and from what it was measured: a
	// BENCH_ONLY=writes run merges it into an earlier run's report.
	Date         string    `json:"date"`
	Revision     string    `json:"revision"`
	LoadStart    string    `json:"loadAverageAtStart"`
	Samples      int       `json:"samples"`
	ReadySeconds []float64 `json:"readySeconds"`
	// WritesPerObject is the mean over the samples; ByResource the same
	// by "resource[/subresource]" and verb, ByWriter by program.
	WritesPerObject float64                       `json:"writesPerObject"`
	ByResource      map[string]map[string]float64 `json:"byResourceAndVerb"`
	ByWriter        map[string]float64            `json:"byWriter"`
	// FailedPerObject is writes answered other than 2xx (a 409
	// conflict, say); UnchangedPerObject is writes that changed nothing.
	FailedPerObject    float64 `json:"failedPerObject"`
	UnchangedPerObject float64 `json:"unchangedPerObject"`
	WritesPerSample    []int   `json:"writesPerSample"`
	// LeaderElection is the controller's and runners' Lease writes
	// outside the objects' namespace over all the samples (WindowSeconds):
	// shown, not charged to an object.
	LeaderElection int     `json:"leaderElectionWrites"`
	WindowSeconds  float64 `json:"windowSeconds"`
	// NotCounted is the other writes in the window outside the objects'
	// namespace, by "writer verb resource": the API server's own, say.
	NotCounted map[string]int `json:"notCounted,omitempty"`
	// DuplicateEvents is audit events logged twice (one audit ID), each
	// counted once.
	DuplicateEvents int `json:"duplicateAuditEvents"`
	// ReadsPerObject and ReadsByReader are the samples' gets and lists,
	// charged as their writes are, means per sample; absent unless the
	// cluster logged every request (LANDFORM_CLUSTER_AUDIT=all).
	ReadsPerObject float64            `json:"readsPerObject,omitempty"`
	ReadsByReader  map[string]float64 `json:"readsByReader,omitempty"`
	// FirstSample is the first object's writes in the order received,
	// its name made "<obj>" in every name.
	FirstSample []Write `json:"firstSample"`
	// Typical is a typical sample's timeline, its writes and engine
	// processes together.
	Typical *Timeline `json:"typical,omitempty"`
}

// Write is one write of an object's life.
type Write struct {
	Millis int64  `json:"ms"` // since the object's create was received
	Verb   string `json:"verb"`
	// Resource is resource[/subresource].
	Resource string `json:"resource"`
	// Name is the object's, namespace/name outside the object's
	// namespace.
	Name   string `json:"name"`
	Writer string `json:"writer"`
	// User is the user it wrote as, the object's name made "<obj>".
	User string `json:"user"`
	// Code is the answer's HTTP status.
	Code int `json:"code"`
	// Changed is "yes", "no", or "" when the log cannot tell.
	Changed string `json:"changed,omitempty"`
}

// auditEvent is the fields of an audit.k8s.io/v1 Event the bench reads.
type auditEvent struct {
	AuditID string `json:"auditID"`
	Stage   string `json:"stage"`
	Verb    string `json:"verb"`
	User    struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	ResponseObject *struct {
		Kind     string `json:"kind"`
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	} `json:"responseObject"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// auditWrite is one write of the log, with what the bench derives.
type auditWrite struct {
	at                              time.Time
	verb, resource, namespace, name string
	user, writer                    string
	code                            int
	changed                         string
}

// readAuditLog reads the audit log's completed writes in the order they
// completed, with each write's Changed from the resourceVersions the log
// shows, and how many events appeared twice.
func readAuditLog(path string) ([]auditWrite, int, error) {
	writes, _, dups, err := readAudit(path)
	return writes, dups, err
}

// isRead reports whether verb only reads. A watch, one long request, is
// neither read nor write here.
func isRead(verb string) bool { return verb == "get" || verb == "list" }

// readAudit is readAuditLog's writes and, in the same pass, the log's gets
// and lists (a log of every request, LANDFORM_CLUSTER_AUDIT=all, has them;
// the usual one none), each once.
func readAudit(path string) (writes, reads []auditWrite, dups int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, 0, err
	}
	defer f.Close()
	seen := map[string]bool{}
	// rv is each object's resourceVersion after its last write seen.
	rv := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, nil, 0, fmt.Errorf("%s: %w", path, err)
		}
		if e.Stage != "ResponseComplete" || e.ObjectRef == nil || e.Verb == "watch" {
			continue
		}
		if seen[e.AuditID] {
			if !isRead(e.Verb) {
				dups++ // the writes' duplicates, as the page tells them
			}
			continue
		}
		seen[e.AuditID] = true
		w := auditWrite{at: e.RequestReceivedTimestamp, verb: e.Verb, resource: e.ObjectRef.Resource,
			namespace: e.ObjectRef.Namespace, name: e.ObjectRef.Name, user: e.User.Username, writer: writer(e.UserAgent)}
		if e.ObjectRef.Subresource != "" {
			w.resource += "/" + e.ObjectRef.Subresource
		}
		if e.ResponseStatus != nil {
			w.code = e.ResponseStatus.Code
		}
		if isRead(e.Verb) {
			reads = append(reads, w)
			continue
		}
		key := e.ObjectRef.APIGroup + "/" + e.ObjectRef.Resource + "/" + e.ObjectRef.Namespace + "/" + e.ObjectRef.Name
		switch {
		case w.code < 200 || w.code > 299:
			w.changed = "no"
		case w.code == http.StatusCreated || e.Verb == "create" || e.Verb == "delete" || e.Verb == "deletecollection":
			w.changed = "yes"
			delete(rv, key)
		}
		if o := e.ResponseObject; o != nil && o.Kind != "Status" && o.Metadata.ResourceVersion != "" && w.code/100 == 2 {
			if e.Verb == "update" || e.Verb == "patch" {
				if before, ok := rv[key]; ok {
					w.changed = map[bool]string{true: "no", false: "yes"}[before == o.Metadata.ResourceVersion]
				}
			}
			rv[key] = o.Metadata.ResourceVersion
		}
		writes = append(writes, w)
	}
	return writes, reads, dups, sc.Err()
}

// versionLog records when each Secret of a namespace was seen at a new
// resourceVersion through a watch: each real write of a Secret is one
// such event, and a write that changed nothing none.
type versionLog struct {
	mu   sync.Mutex
	seen map[string]bool        // name/resourceVersion
	at   map[string][]time.Time // name -> when each version was seen
}

// watchVersions starts a versionLog of ns's Secrets, until ctx ends.
func watchVersions(ctx context.Context, c client.WithWatch, ns string) *versionLog {
	v := &versionLog{seen: map[string]bool{}, at: map[string][]time.Time{}}
	go watchAll(ctx, c, &corev1.SecretList{}, ns, func(_ watch.EventType, o client.Object) {
		now := time.Now()
		v.mu.Lock()
		defer v.mu.Unlock()
		// A watch started again from its last version sends none twice,
		// one started afresh sends ADDED for every Secret again.
		if key := o.GetName() + "/" + o.GetResourceVersion(); !v.seen[key] {
			v.seen[key] = true
			v.at[o.GetName()] = append(v.at[o.GetName()], now)
		}
	})
	return v
}

// times returns a copy of when each Secret was seen at a new version.
func (v *versionLog) times() map[string][]time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[string][]time.Time, len(v.at))
	for k, ts := range v.at {
		out[k] = slices.Clone(ts)
	}
	return out
}

// markSecretWrites tells which of ns's Secrets' successful writes changed
// their Secret, from when the Secret was seen at each new version
// (versions): the audit log has no bodies for them. As many versions as
// writes: every write changed it. Fewer: each version is the last write
// received before it was seen, and a write without one changed nothing;
// unless that gives a write two versions, a version no write or a create
// none, when the Secret's writes stay untold.
func markSecretWrites(events []auditWrite, ns string, versions map[string][]time.Time) {
	writes := map[string][]int{} // name -> indexes in events
	for i, w := range events {
		if w.resource == "secrets" && w.namespace == ns && w.name != "" && w.code/100 == 2 {
			writes[w.name] = append(writes[w.name], i)
		}
	}
	for name, idx := range writes {
		sort.SliceStable(idx, func(a, b int) bool { return events[idx[a]].at.Before(events[idx[b]].at) })
		seen := versions[name]
		if len(seen) > len(idx) {
			continue // written by something the log does not show
		}
		got := make([]int, len(idx))
		told := true
		for _, at := range seen {
			last := -1
			for k, i := range idx {
				if !events[i].at.After(at) {
					last = k
				}
			}
			if last < 0 {
				told = false
				break
			}
			got[last]++
		}
		for k, i := range idx {
			// A create changed its Secret: it must have a version.
			told = told && got[k] <= 1 && (got[k] == 1 || events[i].changed != "yes")
		}
		for k, i := range idx {
			switch {
			case len(seen) == len(idx):
				events[i].changed = "yes"
			case told:
				events[i].changed = map[bool]string{true: "yes", false: "no"}[got[k] == 1]
			}
		}
	}
}

// harnessWriter is the bench harness as a writer.
const harnessWriter = "bench harness"

// writer is the program a user agent names ("landform-controller/v1.2
// (linux/amd64) kubernetes/abc" is landform-controller), with the
// harness and the engines named as the report names them.
func writer(userAgent string) string {
	prog, _, _ := strings.Cut(userAgent, " ")
	prog, _, _ = strings.Cut(prog, "/")
	switch strings.ToLower(prog) {
	case "bench":
		return harnessWriter
	case "opentofu":
		return "tofu"
	case "":
		return "(none)"
	}
	return prog
}

// landformWriter reports a writer of Landform's: the controller, a
// runner, or the engine a runner runs.
func landformWriter(w string) bool {
	switch w {
	case "landform-controller", "landform-runner", "tofu", "terraform", "HashiCorp", "Terraform":
		return true
	}
	return false
}

// receivedCreate is when the API server received the create of ns/name,
// one of resources; false when the log has none.
func receivedCreate(events []auditWrite, ns, name string, resources ...string) (time.Time, bool) {
	for _, w := range events {
		if w.verb == "create" && w.namespace == ns && w.name == name && slices.Contains(resources, w.resource) {
			return w.at, true
		}
	}
	return time.Time{}, false
}

// writeSample is one object of the samples: its name, when its create
// was received and when the harness saw it Ready.
type writeSample struct {
	name          string
	created, done time.Time
}

// ready is the seconds from the create to Ready seen.
func (s writeSample) ready() float64 { return s.done.Sub(s.created).Seconds() }

// objectWrites sorts the log's writes from the samples' first create to
// end: those in ns, and Landform's anywhere else, each charged to the
// sample whose name its name holds, else to the sample whose window
// (its create to the next one's) it falls in; Landform's Lease writes
// outside ns are leader election, not charged; other writes outside ns
// are not counted. It returns the writes of each sample.
func objectWrites(events []auditWrite, ns string, samples []writeSample, end time.Time) (perSample [][]auditWrite, leader int, notCounted map[string]int) {
	perSample = make([][]auditWrite, len(samples))
	notCounted = map[string]int{}
	if len(samples) == 0 {
		return perSample, 0, notCounted
	}
	for _, w := range events {
		if w.at.Before(samples[0].created) || w.at.After(end) {
			continue
		}
		if w.namespace != ns {
			switch {
			case !landformWriter(w.writer):
				notCounted[w.writer+" "+w.verb+" "+w.resource]++
				continue
			case w.resource == "leases":
				leader++
				continue
			}
		}
		i := writeSampleOf(w, samples)
		perSample[i] = append(perSample[i], w)
	}
	for _, ws := range perSample {
		sort.SliceStable(ws, func(a, b int) bool { return ws[a].at.Before(ws[b].at) })
	}
	return perSample, leader, notCounted
}

// writeSampleOf is the sample a write is charged to: the one its name names,
// else the last one created before it. A write to a Pod (or its status,
// binding or events) after the sample its name names was done is of a
// runner Pod kept for reuse (--runner-pod-reuse), serving a later sample:
// charged by time too.
func writeSampleOf(w auditWrite, samples []writeSample) int {
	for i, s := range samples {
		if holdsName(w.name, s.name) {
			if podWrite(w) && !s.done.IsZero() && w.at.After(s.done) {
				break
			}
			return i
		}
	}
	i := 0
	for j, s := range samples {
		if !w.at.Before(s.created) {
			i = j
		}
	}
	return i
}

// podWrite is a write to a Pod, its subresources or its events.
func podWrite(w auditWrite) bool {
	return w.resource == "pods" || strings.HasPrefix(w.resource, "pods/") || (w.resource == "events" && strings.Contains(w.name, "-runner-"))
}

// nameAt finds obj in name as a whole part: at the start or after '-',
// '.' or '/', and at the end or before '-' or '.' ("one-1" is in
// "tfstate-default-one-1" and "one-1.17a" but not in "one-10").
func nameAt(name, obj string) int {
	for from := 0; ; {
		i := strings.Index(name[from:], obj)
		if i < 0 {
			return -1
		}
		i += from
		j := i + len(obj)
		if (i == 0 || strings.ContainsRune("-./", rune(name[i-1]))) && (j == len(name) || strings.ContainsRune("-.", rune(name[j]))) {
			return i
		}
		from = i + 1
	}
}

func holdsName(name, obj string) bool { return nameAt(name, obj) >= 0 }

// eventSuffix is the tail of an Event's name: the object's name, '.' and
// the time in hexadecimal nanoseconds.
var eventSuffix = regexp.MustCompile(`\.[0-9a-f]{12,}$`)

// genericName is name with obj's name as "<obj>" and an Event's time as
// "<time>": the same for every sample.
func genericName(name, obj string) string {
	for i := nameAt(name, obj); i >= 0; i = nameAt(name, obj) {
		name = name[:i] + "<obj>" + name[i+len(obj):]
	}
	return eventSuffix.ReplaceAllString(name, ".<time>")
}

// summarizeWrites is the samples' writes as a report section.
func summarizeWrites(perSample [][]auditWrite, samples []writeSample, ns string) *OneObjectWrites {
	w := &OneObjectWrites{Samples: len(samples), ByResource: map[string]map[string]float64{}, ByWriter: map[string]float64{}}
	if len(samples) == 0 {
		return w
	}
	byResource, byWriter := map[string]map[string]int{}, map[string]int{}
	var all, failed, unchanged int
	for i, ws := range perSample {
		w.ReadySeconds = append(w.ReadySeconds, samples[i].ready())
		w.WritesPerSample = append(w.WritesPerSample, len(ws))
		for _, x := range ws {
			if byResource[x.resource] == nil {
				byResource[x.resource] = map[string]int{}
			}
			byResource[x.resource][x.verb]++
			byWriter[x.writer]++
			all++
			switch {
			case x.code/100 != 2:
				failed++
			case x.changed == "no":
				unchanged++
			}
		}
	}
	n := len(samples)
	for res, byVerb := range byResource {
		w.ByResource[res] = perObject(byVerb, n)
	}
	w.ByWriter = perObject(byWriter, n)
	w.WritesPerObject, w.FailedPerObject, w.UnchangedPerObject = float64(all)/float64(n), float64(failed)/float64(n), float64(unchanged)/float64(n)
	first := samples[0]
	for _, x := range perSample[0] {
		name := genericName(x.name, first.name)
		if x.namespace != ns {
			name = x.namespace + "/" + name
		}
		w.FirstSample = append(w.FirstSample, Write{Millis: x.at.Sub(first.created).Milliseconds(), Verb: x.verb, Resource: x.resource,
			Name: name, Writer: x.writer, User: genericName(x.user, first.name), Code: x.code, Changed: x.changed})
	}
	return w
}

// runWrites is `BENCH_ONLY=writes make bench`: the one-object samples of
// the trivial module alone (no raw engine between them), on an API
// server with an audit log of every write, merged into the existing
// report at o.outJSON as its oneObjectWrites (the one it replaces kept as
// oneObjectWritesBefore when it is of another revision) and rendered as
// o.outMD again. Without an existing report it only prints.
func runWrites(o options) error {
	b, removeTmp, err := newBench(o)
	if err != nil {
		return err
	}
	defer removeTmp()
	o, tmp := b.o, b.tmp
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	date, load := time.Now().UTC().Format(time.RFC3339), loadAvg()
	if err := b.startEngine(engineVersion(o.Tofu)); err != nil {
		return err
	}
	defer b.cloud.srv.Close()
	policy, auditLog := filepath.Join(tmp, "audit-policy.yaml"), filepath.Join(tmp, "audit.log")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return err
	}
	// Blocking: every write's event is in the log before its answer. The
	// log is rotated at 100 MB (the default), far more than a run writes.
	if err := b.startControlPlane(map[string]string{
		"audit-policy-file": policy, "audit-log-path": auditLog, "audit-log-mode": "blocking", "audit-log-format": "json",
	}); err != nil {
		return err
	}
	defer func() { _ = b.env.Stop() }()
	if b.art, err = testenv.StartArtifacts(filepath.Join(tmp, "artifacts")); err != nil {
		return err
	}
	defer b.art.Close()
	b.tr.start(ctx, b.c, writesNamespace)
	secrets := watchVersions(ctx, b.c, writesNamespace)
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: writesNamespace}}); err != nil {
		return err
	}
	rev, err := b.publish(ctx, writesNamespace, module+"# bench-one\n")
	if err != nil {
		return err
	}
	work := filepath.Join(tmp, "controller")
	if b.ctrl, err = b.startController(work, "controller-1.log"); err != nil {
		return err
	}
	defer b.stopController(work)

	samples := make([]writeSample, o.samples)
	for i := range samples {
		name := fmt.Sprintf("%s-%d", writesPrefix, i)
		start, done, err := b.oneObject(ctx, writesNamespace, name, rev)
		if err != nil {
			return err
		}
		samples[i] = writeSample{name: name, created: start, done: done}
		log("one object's writes, sample %d: Ready in %.2fs", i, samples[i].ready())
		time.Sleep(writesSettle)
	}
	end := time.Now()

	events, dups, err := readAuditLog(auditLog)
	if err != nil {
		return err
	}
	markSecretWrites(events, writesNamespace, secrets.times())
	// An object's life starts when the API server received its create.
	for i, s := range samples {
		if at, ok := receivedCreate(events, writesNamespace, s.name, "terraforms"); ok {
			samples[i].created = at
		}
	}
	perSample, leader, notCounted := objectWrites(events, writesNamespace, samples, end)
	w := summarizeWrites(perSample, samples, writesNamespace)
	w.Date, w.Revision, w.LoadStart = date, o.revision, load
	w.LeaderElection, w.NotCounted, w.DuplicateEvents = leader, notCounted, dups
	w.WindowSeconds = end.Sub(samples[0].created).Seconds()
	typical := typicalSample(samples)
	w.Typical = timelineOf(typical, samples[typical], perSample[typical], b.engines.starts())

	var sb strings.Builder
	w.writeMarkdown(func(format string, a ...any) { fmt.Fprintf(&sb, format, a...) }, nil)
	fmt.Print(sb.String())

	return mergeSection(o, "one object's API writes", func(r *Report) { r.mergeOneObjectWrites(w) })
}

// mergeOneObjectWrites puts w into r in place of r's own, which it keeps
// as the one before when it is of another revision: the rest of r is
// unchanged.
func (r *Report) mergeOneObjectWrites(w *OneObjectWrites) {
	if old := r.OneObjectWrites; old != nil && old.Revision != w.Revision {
		r.OneObjectWritesBefore = old
	}
	r.OneObjectWrites = w
}

// verbOrder is the verbs of writes in the order of an object's life.
var verbOrder = []string{"create", "update", "patch", "delete", "deletecollection"}

// writeMarkdown is the section of docs/benchmarks.md, with before's
// figures beside this run's when there is a before.
func (w *OneObjectWrites) writeMarkdown(p printer, before *OneObjectWrites) {
	p("\n## API writes of one object's life (local runners)\n\n")
	p("Measured apart from the run above, on %s from %s by `BENCH_ONLY=writes make bench` (load average at start %s):\n", w.Date, w.Revision, w.LoadStart)
	p("%d objects of the trivial module created one at a time in `%s`, each waited for (Ready with its outputs Secret, %s s)\n", w.Samples, writesNamespace, floats(w.ReadySeconds))
	p("and %.0f s more, with nothing else running, on an API server writing an audit log of every write\n", writesSettle.Seconds())
	p("(create, update, patch, delete, deletecollection; the log in blocking mode, so that no write is dropped). Each write in `%s` is charged to the\n", writesNamespace)
	p("object its name names, else to the object created last before it; the controller's, runners' and engine's writes\n")
	p("elsewhere too, but for their Leases (leader election), which are shown apart. The writer is the program its user agent\n")
	p("names. A write *changed nothing* when the object's resourceVersion after it is the one after its previous write; a\n")
	p("Secret's (logged without its body) when a watch on the namespace's Secrets saw no new version of it between that write\n")
	p("and the next (`?`: not told).\n\n")

	verbs := map[string]bool{}
	for _, m := range []*OneObjectWrites{w, before} {
		if m == nil {
			continue
		}
		for _, byVerb := range m.ByResource {
			for v := range byVerb {
				verbs[v] = true
			}
		}
	}
	var cols []string
	for _, v := range verbOrder {
		if verbs[v] {
			cols = append(cols, v)
			delete(verbs, v)
		}
	}
	for v := range verbs {
		cols = append(cols, v)
	}
	sort.Strings(cols[len(cols)-len(verbs):])

	p("Writes per object, mean of %d", w.Samples)
	if before != nil {
		p("; before: %s (%s, %d objects)", before.Revision, before.Date, before.Samples)
	}
	p(".\n\n| resource | %s | all |", strings.Join(cols, " | "))
	if before != nil {
		p(" before | change |")
	}
	p("\n|---|%s---|", strings.Repeat("---|", len(cols)))
	if before != nil {
		p("---|---|")
	}
	p("\n")
	resources := map[string]bool{}
	for res := range w.ByResource {
		resources[res] = true
	}
	if before != nil {
		for res := range before.ByResource {
			resources[res] = true
		}
	}
	byVerbTotal := map[string]float64{}
	for _, res := range slices.Sorted(maps.Keys(resources)) {
		cells := make([]string, len(cols))
		all := 0.0
		for i, v := range cols {
			x := w.ByResource[res][v]
			cells[i], all, byVerbTotal[v] = count(x), all+x, byVerbTotal[v]+x
		}
		p("| `%s` | %s | %s |", res, strings.Join(cells, " | "), count(all))
		if before != nil {
			was := 0.0
			for _, x := range before.ByResource[res] {
				was += x
			}
			p(" %s | %s |", count(was), change(was, all))
		}
		p("\n")
	}
	cells := make([]string, len(cols))
	for i, v := range cols {
		cells[i] = "**" + count(byVerbTotal[v]) + "**"
	}
	p("| all | %s | **%s** |", strings.Join(cells, " | "), count(w.WritesPerObject))
	if before != nil {
		p(" **%s** | %s |", count(before.WritesPerObject), change(before.WritesPerObject, w.WritesPerObject))
	}
	p("\n\n")
	p("By writer: %s. Failed (not 2xx): %s; changed nothing: %s, per object. Writes per sample: %s.\n",
		perResource(w.ByWriter), count(w.FailedPerObject), count(w.UnchangedPerObject), ints(w.WritesPerSample))
	p("Leader election: %d Lease writes in the %.0f s of all the samples, not charged to an object.", w.LeaderElection, w.WindowSeconds)
	if len(w.NotCounted) > 0 {
		p(" Not counted, outside `%s` and not Landform's: %s.", writesNamespace, counts(w.NotCounted))
	}
	if w.DuplicateEvents > 0 {
		p(" %d audit events were logged twice and counted once.", w.DuplicateEvents)
	}
	p("\n\nThe first object's writes in order (ms since its create was received; `<obj>` is its name):\n\n")
	writeList(p, w.FirstSample)
	if before != nil {
		p("\n<details><summary>Before: %s</summary>\n\n", before.Revision)
		writeList(p, before.FirstSample)
		p("\n</details>\n")
	}
	if w.Typical != nil {
		w.Typical.writeMarkdown(p, w.Samples)
	}
}

// writeList is one object's writes in order as a table.
func writeList(p printer, ws []Write) {
	p("| # | ms | verb | resource | name | writer | as user | code | changed |\n|---|---|---|---|---|---|---|---|---|\n")
	for i, x := range ws {
		changed := x.Changed
		if changed == "" {
			changed = "?"
		}
		code := fmt.Sprint(x.Code)
		if x.Code/100 != 2 {
			code = "**" + code + "**"
		}
		if changed == "no" && x.Code/100 == 2 {
			changed = "**no**"
		}
		p("| %d | %d | %s | `%s` | `%s` | %s | `%s` | %s | %s |\n", i+1, x.Millis, x.Verb, x.Resource, x.Name, x.Writer, x.User, code, changed)
	}
}

// change is after against before: "−2", "+1.5", "=".
func change(before, after float64) string {
	switch d := after - before; {
	case d > 0.005:
		return "+" + count(d)
	case d < -0.005:
		return "−" + count(-d)
	}
	return "="
}

func ints(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ", ")
}
