package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/utils/ptr"
)

// ClusterReport is what `make bench-cluster` measured on the single-node
// cluster of `make cluster-up` with Landform installed by its chart:
// docs/benchmarks-cluster.json, rendered as a section of
// docs/benchmarks.md.
type ClusterReport struct {
	Date     string        `json:"date"`
	Revision string        `json:"revision"`
	Machine  Machine       `json:"machine"`
	Cluster  ClusterSetup  `json:"cluster"`
	Config   ClusterConfig `json:"config"`
	Idle     ClusterIdle   `json:"idle"`
	One      ClusterOne    `json:"oneObject"`
	Scale    ClusterScale  `json:"scale"`
	Targets  []Target      `json:"targets"`
	// WritesBefore is the one-object sample's API writes of the run this
	// one replaced, from another revision: the write table is published
	// before and after a change.
	WritesBefore *ClusterWrites `json:"oneObjectWritesBefore,omitempty"`
}

// ClusterWrites is a run's API writes per Landform object sample.
type ClusterWrites struct {
	Date       string             `json:"date"`
	Revision   string             `json:"revision"`
	Total      float64            `json:"landformAPIWritesPerObject"`
	ByResource map[string]float64 `json:"landformAPIWritesPerObjectByResource"`
}

// carryWritesBefore keeps in r the writes of the run kept at path when it
// is another revision's (or that run's own before, when it is the same
// revision measured again).
func carryWritesBefore(r *ClusterReport, path string) {
	var old ClusterReport
	if readJSONFile(path, &old) != nil {
		return
	}
	if old.Revision == r.Revision {
		r.WritesBefore = old.WritesBefore
		return
	}
	r.WritesBefore = &ClusterWrites{Date: old.Date, Revision: old.Revision, Total: old.One.LandformAPIWrites, ByResource: old.One.LandformAPIWritesByRes}
}

// ClusterSetup is what was measured.
type ClusterSetup struct {
	Node            string `json:"node"`
	Kubelet         string `json:"kubeletVersion"`
	Runtime         string `json:"containerRuntime"`
	ControllerImage string `json:"controllerImage"`
	// ControllerVersion is the version the controller logged at its start.
	ControllerVersion string   `json:"controllerVersion"`
	RunnerImage       string   `json:"runnerImage"`
	ControllerArgs    []string `json:"controllerArgs"`
}

// ClusterConfig is how the run was set up.
type ClusterConfig struct {
	N                 int     `json:"n"`
	Samples           int     `json:"samples"`
	Namespace         string  `json:"namespace"`
	IdleWindowSeconds float64 `json:"idleWindowSeconds"`
}

// ClusterIdle is the cluster with nothing to do, before the samples: the
// floor under every other figure.
type ClusterIdle struct {
	WindowSeconds  float64        `json:"windowSeconds"`
	CPU            ClusterCPU     `json:"cpuSeconds"`
	APIWrites      int            `json:"apiWrites"`
	APIWritesByRes map[string]int `json:"apiWritesByResource"`
	// Others is the machine's CPU-seconds (/proc/stat) spent by anything
	// not measured here, less the harness: other work on the machine.
	Others float64 `json:"otherProcessesCPUSeconds"`
}

// ClusterOne is one object through Landform beside the raw engine in a
// Pod of the same runner image, sample by sample.
type ClusterOne struct {
	// RawSeconds: the raw engine's Pod, create → phase Succeeded.
	RawSeconds []float64 `json:"rawSeconds"`
	// RawEngineSeconds: the raw engine's Pod, create → its engine's end
	// (the log line after `apply`).
	RawEngineSeconds []float64 `json:"rawEngineEndSeconds"`
	// LandformSeconds: create → Ready with the outputs Secret.
	LandformSeconds []float64 `json:"landformSeconds"`
	RawMedian       float64   `json:"rawMedianSeconds"`
	RawEngineMedian float64   `json:"rawEngineEndMedianSeconds"`
	LandformMedian  float64   `json:"landformMedianSeconds"`
	// Ratio is Landform's median over the raw Pod's; ExtraSeconds their
	// difference, ExtraOverEngineSeconds Landform's median less the raw
	// engine's end.
	Ratio                  float64 `json:"ratio"`
	ExtraSeconds           float64 `json:"extraSeconds"`
	ExtraOverEngineSeconds float64 `json:"extraOverEngineEndSeconds"`
	// The phases of each, between milestones (see Phase).
	RawPhases      []Phase `json:"rawPhases"`
	LandformPhases []Phase `json:"landformPhases"`
	// RunnerStartSeconds is the controller's landform_runner_start_seconds
	// (placement pod) of each sample: asking for a runner Pod → its
	// runner answering the health check.
	RunnerStartSeconds []float64 `json:"runnerStartSeconds"`
	RunnerStartMedian  float64   `json:"runnerStartMedianSeconds"`
	// PodReuse is the controller's --runner-pod-reuse ("": off); then a
	// sample ends once its runner Pod is kept, not gone, and
	// LandformPodsCreated is how many runner Pods the samples created.
	PodReuse            string `json:"runnerPodReuse,omitempty"`
	LandformPodsCreated int    `json:"landformRunnerPodsCreated,omitempty"`
	// CPU and API writes per sample, from its create until its Pod is
	// gone (teardown included), medians.
	RawCPU            ClusterCPU `json:"rawCPUSecondsPerPod"`
	LandformCPU       ClusterCPU `json:"landformCPUSecondsPerObject"`
	RawAPIWrites      float64    `json:"rawAPIWritesPerPod"`
	LandformAPIWrites float64    `json:"landformAPIWritesPerObject"`
	// The API writes by resource, means per sample.
	RawAPIWritesByRes      map[string]float64 `json:"rawAPIWritesPerPodByResource"`
	LandformAPIWritesByRes map[string]float64 `json:"landformAPIWritesPerObjectByResource"`
	// The same samples' writes from the cluster's audit log, with their
	// writers (cluster_writes.go); nil when the cluster keeps no log.
	RawWrites      *OneObjectWrites `json:"rawAuditedWrites,omitempty"`
	LandformWrites *OneObjectWrites `json:"landformAuditedWrites,omitempty"`
	LoadStart      string           `json:"loadAverageAtStart"`
	// The raw engine's Pod keeping its state in a Secret, as the local
	// raw engine does (cluster_rawstate.go): create → Succeeded, CPU and
	// API writes as above. Absent from runs before it was measured.
	RawStateSeconds        []float64          `json:"rawStateSeconds,omitempty"`
	RawStateMedian         float64            `json:"rawStateMedianSeconds,omitempty"`
	RawStateCPU            *ClusterCPU        `json:"rawStateCPUSecondsPerPod,omitempty"`
	RawStateAPIWrites      float64            `json:"rawStateAPIWritesPerPod,omitempty"`
	RawStateAPIWritesByRes map[string]float64 `json:"rawStateAPIWritesPerPodByResource,omitempty"`
}

// Phase is one stretch of a sample's timeline, named after the milestone
// that ends it; it starts at the milestone before (the first at the
// create).
type Phase struct {
	Name string `json:"name"`
	// Until says what ends it and where that is seen.
	Until   string    `json:"until"`
	Seconds []float64 `json:"seconds"`
	Median  float64   `json:"medianSeconds"`
	// Missing counts the samples where its end was not seen: their time
	// is in the next phase.
	Missing int `json:"missing,omitempty"`
}

// ClusterScale is N objects created at once.
type ClusterScale struct {
	N               int     `json:"n"`
	AllReadySeconds float64 `json:"allReadySeconds"`
	P50Seconds      float64 `json:"p50Seconds"`
	P95Seconds      float64 `json:"p95Seconds"`
	MaxSeconds      float64 `json:"maxSeconds"`
	// AllGoneSeconds is from the first create until the last runner Pod
	// was gone; the CPU is over that window.
	AllGoneSeconds float64 `json:"allGoneSeconds"`
	// PodsKept is, with --runner-pod-reuse, the runner Pods kept idle for
	// reuse at the end of the window (AllGoneSeconds: until the others
	// were gone and these idle).
	PodsKept               int            `json:"runnerPodsKept,omitempty"`
	CPU                    ClusterCPU     `json:"cpuSeconds"`
	CPUPerObject           float64        `json:"cpuSecondsPerObject"`
	CPUBound               float64        `json:"cpuBoundSeconds"`
	RunnerPods             int            `json:"runnerPods"`
	MaxPodsAtOnce          int            `json:"maxRunnerPodsAtOnce"`
	RunnerStartMeanSeconds float64        `json:"runnerStartMeanSeconds"`
	RunsStarted            int            `json:"runsStarted"`
	RunsByAction           map[string]int `json:"runsByAction"`
	APIWrites              int            `json:"apiWrites"`
	APIWritesPerObject     float64        `json:"apiWritesPerObject"`
	APIWritesByRes         map[string]int `json:"apiWritesByResource"`
	// OtherPods is Pods created in other namespaces meanwhile.
	OtherPods int `json:"otherNamespacesPods"`
	// Phases is where the objects' time went, medians over the N
	// objects, from the same watches as one object's (scalePhases).
	Phases      []Phase `json:"phases"`
	MachineBusy float64 `json:"machineCPUSeconds"`
	Others      float64 `json:"otherProcessesCPUSeconds"`
	LoadStart   string  `json:"loadAverageAtStart"`
	LoadEnd     string  `json:"loadAverageAtEnd"`
}

// sampleTimes is one sample's timeline: its create, and when each
// milestone (by phaseDef key) was seen; a zero time was not seen.
type sampleTimes struct {
	start time.Time
	at    map[string]time.Time
}

// phaseDef is a phase of a timeline: the milestone that ends it.
type phaseDef struct{ key, name, until string }

// landformPhases is a Landform sample's timeline.
var landformPhases = []phaseDef{
	{"recorded", "run recorded", "the plan run recorded in the object's `status.run` (watch on the object)"},
	{"pod", "runner Pod created", "the runner Pod created (watch on Pods)"},
	{"scheduled", "Pod scheduled", "its `spec.nodeName` set (watch)"},
	{"running", "container started", "its container running (watch on its status)"},
	{"answering", "runner answering", "the run recorded + the controller's `landform_runner_start_seconds` for the sample"},
	{"init", "init", "the engine's `successfully initialized` in the controller's log of the run (the workspace upload, the run's start, `init`)"},
	{"planned", "plan", "`plan`, `show -json`, the plan stored: event `ChangesPlanned` (watch on Events), or for a plan applied at once (no event of its own) the apply run recorded"},
	{"applyRecorded", "apply recorded", "the apply run recorded in `status.run`"},
	{"applied", "apply and outputs", "event `Applied`: the plan file sent, `apply`, the outputs Secret written"},
	{"ready", "Ready", "`Ready` at the revision with no run in flight, and the outputs Secret with both outputs (watches)"},
}

// scalePhases is an object's timeline among N: landformPhases but for
// the two that need a sample of its own (the controller's histogram and
// log).
var scalePhases = func() []phaseDef {
	var out []phaseDef
	for _, d := range landformPhases {
		if d.key != "answering" && d.key != "init" {
			out = append(out, d)
		}
	}
	return out
}()

// rawPhases is a raw engine Pod's timeline.
var rawPhases = []phaseDef{
	{"scheduled", "Pod scheduled", "its `spec.nodeName` set (watch on Pods)"},
	{"running", "container started", "its container running (watch on its status)"},
	{"init", "init", "`init-done` in the Pod's log (containerd's timestamp of the line)"},
	{"apply", "apply", "`apply-done` in its log"},
	{"exited", "exit seen", "the container terminated in the Pod's status (watch)"},
	{"succeeded", "Succeeded", "phase `Succeeded` (watch)"},
}

// phaseSeconds is each phase's duration in one sample: from the milestone
// before it (the create for the first) to its own. A milestone not seen
// (missing) ends a phase of 0, and its time goes to the next phase; one
// seen before the milestone it follows (two sources' clocks and lags)
// also ends a phase of 0.
func phaseSeconds(defs []phaseDef, st sampleTimes) (secs []float64, missing []bool) {
	secs, missing = make([]float64, len(defs)), make([]bool, len(defs))
	prev := st.start
	for i, d := range defs {
		at := st.at[d.key]
		switch {
		case at.IsZero():
			missing[i] = true
		case at.After(prev):
			secs[i] = at.Sub(prev).Seconds()
			prev = at
		}
	}
	return secs, missing
}

// phaseStats is each phase over the samples, with its median.
func phaseStats(defs []phaseDef, samples []sampleTimes) []Phase {
	out := make([]Phase, len(defs))
	for i, d := range defs {
		out[i] = Phase{Name: d.name, Until: d.until, Seconds: []float64{}}
	}
	for _, st := range samples {
		secs, missing := phaseSeconds(defs, st)
		for i := range defs {
			out[i].Seconds = append(out[i].Seconds, secs[i])
			if missing[i] {
				out[i].Missing++
			}
		}
	}
	for i := range out {
		out[i].Median = median(out[i].Seconds)
	}
	return out
}

// runLogTimes reads the controller's JSON log lines (zap, with "ts" as
// ISO 8601 or seconds since the epoch) of the run runID of object key
// ("namespace/name"): when its first line arrived, and when the engine
// said its init was done ("... has been successfully initialized!").
// Those lines are the run's output, which the controller logs at debug
// level (its `runs` logger) as its runner streams them.
func runLogTimes(log, key, runID string) (first, initDone time.Time) {
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var l struct {
			TS        json.RawMessage `json:"ts"`
			Msg       string          `json:"msg"`
			Terraform string          `json:"terraform"`
			Run       string          `json:"run"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Terraform != key || l.Run != runID {
			continue
		}
		at, ok := logTime(l.TS)
		if !ok {
			continue
		}
		if first.IsZero() {
			first = at
		}
		if initDone.IsZero() && strings.Contains(l.Msg, "has been successfully initialized") {
			initDone = at
		}
	}
	return first, initDone
}

// startedVersion is the version in the controller's "starting
// landform-controller" log line, or "".
func startedVersion(log string) string {
	for _, line := range strings.Split(log, "\n") {
		var l struct {
			Msg     string `json:"msg"`
			Version string `json:"version"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "starting landform-controller" {
			return l.Version
		}
	}
	return ""
}

// logTime reads a zap "ts": an ISO 8601 string or seconds since the epoch.
func logTime(raw json.RawMessage) (time.Time, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		t, err := time.Parse(time.RFC3339Nano, s)
		return t, err == nil
	}
	var f float64
	if json.Unmarshal(raw, &f) == nil && f > 0 {
		sec := int64(f)
		return time.Unix(sec, int64((f-float64(sec))*1e9)), true
	}
	return time.Time{}, false
}

// logLineTimes reads a Pod's log fetched with timestamps ("<RFC 3339
// time> <text>" per line): when each text was first written.
func logLineTimes(log string) map[string]time.Time {
	out := map[string]time.Time{}
	for _, line := range strings.Split(log, "\n") {
		ts, text, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			continue
		}
		if _, seen := out[text]; !seen {
			out[text] = at
		}
	}
	return out
}

// The targets for one object in Pod mode: its time, and issue 36's API
// writes and machine CPU.
const (
	clusterTargetOne    = "one object, runner Pod"
	clusterTargetWrites = "API writes per object, runner Pod"
	clusterTargetCPU    = "machine CPU per object, runner Pod"
)

// targets is the targets this run can tell.
func (r *ClusterReport) targets() []Target {
	o := r.One
	writes := fmt.Sprintf("%.0f", o.LandformAPIWrites)
	if w := o.LandformWrites; w != nil {
		at := ""
		if w.Revision != "" && w.Revision != r.Revision {
			at = " at " + w.Revision
		}
		writes += fmt.Sprintf(" (Landform's own %s%s, the rest Kubernetes' for the runner Pod); the raw engine's Pod %.0f", count(w.landformOwn()), at, o.RawAPIWrites)
	}
	raw, lf := o.RawCPU.Total(), o.LandformCPU.Total()
	cpu := fmt.Sprintf("%.2f CPU-s vs %.2f CPU-s: %.2f×", lf, raw, ratio(lf, raw))
	if rs := o.RawStateCPU; rs != nil {
		// Met is still judged against the bare Pod, the issue's own.
		cpu += fmt.Sprintf("; vs the raw engine's Pod keeping its state in a Secret (%.2f CPU-s): %.2f×", rs.Total(), ratio(lf, rs.Total()))
		writes += fmt.Sprintf("; the raw engine's Pod keeping its state in a Secret %.0f", o.RawStateAPIWrites)
	}
	// Kept Pods change what a sample is: say so where the target is judged.
	reuse := ""
	if o.PodReuse != "" {
		reuse = fmt.Sprintf("runner Pods kept for reuse (`--runner-pod-reuse=%s`): %d Pod(s) for %d samples", o.PodReuse, o.LandformPodsCreated, len(o.LandformSeconds))
	}
	return []Target{{
		Name: clusterTargetOne, Want: "≤ the raw engine in a Pod + 1.5 s",
		Measured: fmt.Sprintf("%.2f s vs %.2f s (raw Pod: create → Succeeded): %+.2f s; vs the raw engine's end in its Pod (%.2f s): %+.2f s",
			o.LandformMedian, o.RawMedian, o.ExtraSeconds, o.RawEngineMedian, o.ExtraOverEngineSeconds),
		Met: ptr.To(o.LandformMedian <= o.RawMedian+1.5),
	}, {
		Name: clusterTargetWrites, Want: "≤ 22", Measured: writes, Met: ptr.To(o.LandformAPIWrites <= 22), Note: reuse,
	}, {
		Name: clusterTargetCPU, Want: "≤ 1.5× the raw engine's Pod",
		Measured: cpu,
		Met:      ptr.To(lf <= 1.5*raw),
		Note:     reuse,
	}}
}

// applyNotes copies notes[target name] into each target not met.
func (r *ClusterReport) applyNotes(notes map[string]string) {
	rr := Report{Targets: r.Targets}
	rr.applyNotes(notes)
}

// readClusterReport reads the cluster run kept beside the default run's
// report main; nil without error when there is none.
func readClusterReport(main string) (*ClusterReport, error) {
	var r ClusterReport
	err := readJSONFile(clusterReportPath(main), &r)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// phaseSum is the sum of the medians of the phases named.
func phaseSum(phases []Phase, names ...string) float64 {
	var s float64
	for _, p := range phases {
		for _, n := range names {
			if p.Name == n {
				s += p.Median
			}
		}
	}
	return s
}

// writeMarkdown renders the section of docs/benchmarks.md on runner Pods.
func (r *ClusterReport) writeMarkdown(p printer) {
	o, s := r.One, r.Scale
	p("\n## Runner Pods on a real cluster\n\n")
	p("Generated by `make bench-cluster` (`hack/bench -cluster`) on %s, from %s; the figures are also in\n", r.Date, r.Revision)
	p("[benchmarks-cluster.json](benchmarks-cluster.json). Landform as its Helm chart installs it (`--runner=pod`: each object's runs\n")
	p("in a runner Pod) on the single-node cluster of `make cluster-up` ([e2e/cluster/README.md](../e2e/cluster/README.md)), beside the\n")
	p("raw engine in a Pod of the same runner image on the same node. The figures above are of another setup (envtest, runner\n")
	p("processes, the `kubernetes` backend for the raw engine too): compare within a section, not across.\n\n")

	p("| | |\n|---|---|\n")
	p("| CPU | %d × %s |\n", r.Machine.Cores, r.Machine.CPUModel)
	p("| memory | %.1f GiB |\n", r.Machine.MemoryGiB)
	p("| kernel | %s |\n", r.Machine.Kernel)
	p("| node | %s: kubelet %s, %s |\n", r.Cluster.Node, r.Cluster.Kubelet, r.Cluster.Runtime)
	p("| controller | `%s`, version `%s` |\n", r.Cluster.ControllerImage, r.Cluster.ControllerVersion)
	p("| controller flags | `%s` |\n", strings.Join(r.Cluster.ControllerArgs, " "))
	p("| runner image | `%s` |\n", r.Cluster.RunnerImage)
	p("| engine | %s |\n", r.Machine.Engine)
	p("| load average at start / end | %s / %s |\n", r.Machine.LoadStart, r.Machine.LoadEnd)
	p("| idle cluster, %.0f s before the samples | %.2f CPU-s (%.3f cores): %s; other processes %.1f CPU-s |\n",
		r.Idle.WindowSeconds, r.Idle.CPU.Total(), r.Idle.CPU.Total()/nonZero(r.Idle.WindowSeconds), cpuParts(r.Idle.CPU), r.Idle.Others)
	if s.N > 0 {
		p("| during the %d objects: Pods of other namespaces created, other processes' CPU | %d, %.1f CPU-s |\n", s.N, s.OtherPods, s.Others)
	}

	p("\n### Method\n\n")
	p("The harness (`hack/bench -cluster`) talks to the cluster as a client: the controller is the chart's Pod, untouched. The module is\n")
	p("the trivial one of the sections above (one `terraform_data`, two outputs), pushed to the platform's git server and cloned by\n")
	p("the real source-controller. Every object is auto-approved, writes its outputs to a Secret, has `interval: 1h` and\n")
	p("`deletionPolicy: Orphan` (cleaning up runs nothing); its state is in the `kubernetes` backend.\n\n")
	p("1. **One object**: %d samples, alternating: the raw engine's Pod, then one new Landform object. The raw engine's Pod runs the\n", r.Config.Samples)
	p("   runner image (`%s`) with the runner Pod's security context, its shell running `tofu init` and\n", r.Cluster.RunnerImage)
	p("   `tofu apply -auto-approve` on the module from a ConfigMap volume, local state in an emptyDir, `CHECKPOINT_DISABLE=1`\n")
	p("   (no provider to install: `terraform_data` is built in); it is timed from its create to phase `Succeeded`, and to its\n")
	p("   engine's end (the line its script prints after `apply`, timestamped by containerd). A Landform object is timed from its\n")
	p("   create to `Ready` at the revision with no run in flight and its outputs Secret holding both outputs. Each sample starts\n")
	p("   once the namespace has no Pod (the last sample's torn down) and a second has passed. Medians. The first Landform sample\n")
	p("   includes the controller's first download of the GitRepository's artifact.\n")
	if r.One.PodReuse != "" {
		p("   The controller keeps runner Pods for reuse in this run (`--runner-pod-reuse=%s`): a Landform sample ends, and the next\n", r.One.PodReuse)
		p("   starts, once the namespace's only Pods are runner Pods it keeps (its `landform_runner_pods_kept`), not once they are gone.\n")
	}
	p("2. **Where the time goes**: each sample's timeline from watches (Pods, Events, Terraform objects, Secrets: the API's own\n")
	p("   timestamps, the Pods' conditions and the Events', are whole seconds), the controller's `landform_runner_start_seconds`\n")
	p("   (read from its metrics endpoint on the Pod IP before and after the sample) and, for the end of `init`, the controller's log\n")
	p("   of the run's output (its `runs` lines at `--log-level=debug`, which e2e/cluster/values.yaml sets). A phase is the time\n")
	p("   from the milestone before to its own; the medians of the phases need not add up to the median of the whole.\n")
	if s.N > 0 {
		p("3. **%d objects** created at once (8 clients in parallel) on the one GitRepository; all-Ready time from the first create,\n", s.N)
		if r.One.PodReuse != "" {
			p("   latencies p50/p95, then until every runner Pod is gone or idle and kept.\n")
		} else {
			p("   latencies p50/p95, then until the last runner Pod is gone.\n")
		}
	}
	p("%d. **CPU**, from counters read before and after each window: the controller container's cgroup (`cpuacct`), the BestEffort\n", map[bool]int{true: 4, false: 3}[s.N > 0])
	p("   Pods' cgroup (`kubepods/besteffort`: the runner Pods and the raw engine's Pods, which set no resources), and the cluster's\n")
	p("   host processes from `/proc/<pid>/stat` (utime+stime and their reaped children's): kubelet, containerd, kube-apiserver,\n")
	p("   etcd, kube-scheduler, kube-controller-manager. containerd's shims (one per Pod, not children of any of those) are read\n")
	p("   every %d ms while they live, with the processes they reaped: the runc processes, and the containers' processes, whose CPU\n", shimPoll.Milliseconds())
	p("   is the Pods' cgroup's and is taken off. A sample's CPU is from its create until its Pod is gone: the Pod's teardown\n")
	p("   included. The machine's CPU (`/proc/stat`) less all of these and the harness's is *other processes*: other work on the\n")
	p("   machine, within the counters' precision (the processes' are in 10 ms ticks).\n")
	p("   API writes are the API server's `apiserver_request_total` (POST, PUT, PATCH, DELETE, APPLY) less the harness's own")
	if r.One.LandformWrites != nil {
		p(";\n   who made each is from the API server's audit log ([Every write, by writer](#every-write-by-writer))")
	}
	p(".\n")

	p("\n### Target\n\n")
	(&Report{Targets: r.Targets}).targetsTable(p)

	p("\n### One object\n\n")
	p("| | median | samples (s) |\n|---|---|---|\n")
	p("| raw engine in a Pod: create → `Succeeded` | %.2f s | %s |\n", o.RawMedian, floats(o.RawSeconds))
	p("| raw engine in a Pod: create → its engine's end | %.2f s | %s |\n", o.RawEngineMedian, floats(o.RawEngineSeconds))
	p("| Landform: create → Ready + outputs Secret | %.2f s | %s |\n", o.LandformMedian, floats(o.LandformSeconds))
	p("\nLandform over the raw engine's Pod: **%.2f×**, %+.2f s; over the raw engine's end in its Pod: %+.2f s.\n",
		o.Ratio, o.ExtraSeconds, o.ExtraOverEngineSeconds)
	if o.PodReuse != "" {
		p("\nThe controller keeps runner Pods for reuse (`--runner-pod-reuse=%s`): the %d Landform samples ran in %d runner Pod(s), each created by the first sample it served and recycled for the next; a sample ends once its runner Pod is idle and kept, not gone, and its CPU and writes are counted until then.\n",
			o.PodReuse, len(o.LandformSeconds), o.LandformPodsCreated)
	}

	p("\n### Where the time goes\n\n")
	p("Landform, one object (medians of %d samples; sum of the medians %.2f s):\n\n", len(o.LandformSeconds), phaseSum(o.LandformPhases, phaseNames(o.LandformPhases)...))
	phaseTable(p, o.LandformPhases)
	p("\nThe raw engine's Pod (sum of the medians %.2f s):\n\n", phaseSum(o.RawPhases, phaseNames(o.RawPhases)...))
	phaseTable(p, o.RawPhases)
	p("\nThe controller's `landform_runner_start_seconds` (asking for a runner Pod → its runner answering): median %.2f s (%s).\n",
		o.RunnerStartMedian, floats(o.RunnerStartSeconds))

	p("\n### CPU per object\n\n")
	p("Medians per sample, from its create until its Pod is gone; the idle cluster's rate over the Landform sample's median time\n")
	p("is the floor (what the same parties spend doing nothing).\n\n")
	rs := o.RawStateCPU
	if rs == nil {
		p("| CPU-s | raw engine's Pod | Landform object | idle cluster, %.2f s |\n|---|---|---|---|\n", o.LandformMedian)
	} else {
		p("| CPU-s | raw engine's Pod | raw engine's Pod keeping its state | Landform object | idle cluster, %.2f s |\n|---|---|---|---|---|\n", o.LandformMedian)
	}
	idle := r.Idle.CPU
	scale := o.LandformMedian / nonZero(r.Idle.WindowSeconds)
	for _, row := range []struct {
		name string
		f    func(ClusterCPU) float64
	}{
		{"controller", func(c ClusterCPU) float64 { return c.Controller }},
		{"Pods (runner or raw engine)", func(c ClusterCPU) float64 { return c.Pods }},
		{"kubelet", func(c ClusterCPU) float64 { return c.Kubelet }},
		{"containerd", func(c ClusterCPU) float64 { return c.Containerd }},
		{"containerd's shims and runc", func(c ClusterCPU) float64 { return c.Shims }},
		{"kube-apiserver", func(c ClusterCPU) float64 { return c.APIServer }},
		{"etcd", func(c ClusterCPU) float64 { return c.Etcd }},
		{"kube-scheduler", func(c ClusterCPU) float64 { return c.Scheduler }},
		{"kube-controller-manager", func(c ClusterCPU) float64 { return c.ControllerManager }},
		{"**all**", func(c ClusterCPU) float64 { return c.Total() }},
	} {
		if rs == nil {
			p("| %s | %.3f | %.3f | %.3f |\n", row.name, row.f(o.RawCPU), row.f(o.LandformCPU), row.f(idle)*scale)
		} else {
			p("| %s | %.3f | %.3f | %.3f | %.3f |\n", row.name, row.f(o.RawCPU), row.f(*rs), row.f(o.LandformCPU), row.f(idle)*scale)
		}
	}
	if rs == nil {
		p("| API writes | %.0f | %.0f | |\n", o.RawAPIWrites, o.LandformAPIWrites)
		p("\nAPI writes by resource, per sample: raw engine's Pod %s; Landform object %s.\n", perResource(o.RawAPIWritesByRes), perResource(o.LandformAPIWritesByRes))
	} else {
		p("| API writes | %.0f | %.0f | %.0f | |\n", o.RawAPIWrites, o.RawStateAPIWrites, o.LandformAPIWrites)
		p("\nThe raw engine's Pod keeping its state does what the local section's raw engine does, in a Pod: its state in a Secret of the\n")
		p("namespace (the kubernetes backend, in-cluster, with a ServiceAccount of its own), `init`, `plan`, the `apply` of that plan\n")
		p("and `output -json`; create → `Succeeded` median %.2f s. The bare raw engine's Pod keeps its state on a disk that goes\n", o.RawStateMedian)
		p("with it and runs `init` and `apply` alone; issue 36's targets were written against it, and are judged against it here.\n")
		p("\nAPI writes by resource, per sample: raw engine's Pod %s; keeping its state %s; Landform object %s.\n",
			perResource(o.RawAPIWritesByRes), perResource(o.RawStateAPIWritesByRes), perResource(o.LandformAPIWritesByRes))
	}
	if b := r.WritesBefore; b != nil {
		p("\nLandform's API writes per object sample, before (%s, %s) and after (%s):\n\n", b.Revision, b.Date, r.Revision)
		p("| resource | before | after | change |\n|---|---|---|---|\n")
		seen := map[string]bool{}
		for k := range b.ByResource {
			seen[k] = true
		}
		for k := range o.LandformAPIWritesByRes {
			seen[k] = true
		}
		for _, k := range slices.Sorted(maps.Keys(seen)) {
			p("| `%s` | %.2f | %.2f | %+.2f |\n", k, b.ByResource[k], o.LandformAPIWritesByRes[k], o.LandformAPIWritesByRes[k]-b.ByResource[k])
		}
		p("| **all** | %.0f | %.0f | %+.0f |\n", b.Total, o.LandformAPIWrites, o.LandformAPIWrites-b.Total)
	}
	p("\n(Each party's median is taken on its own: the row **all** is the median of the totals.)\n")
	if o.RawWrites != nil && o.LandformWrites != nil {
		writeAuditedWrites(p, o.RawWrites, o.LandformWrites)
	}

	if s.N > 0 {
		p("\n### %d objects\n\n", s.N)
		p("| | |\n|---|---|\n")
		p("| all Ready | %.1f s |\n", s.AllReadySeconds)
		p("| latency p50 / p95 / max | %.1f s / %.1f s / %.1f s |\n", s.P50Seconds, s.P95Seconds, s.MaxSeconds)
		if s.PodsKept > 0 {
			p("| last runner Pod gone, or idle and kept for reuse (%d kept) | %.1f s |\n", s.PodsKept, s.AllGoneSeconds)
		} else {
			p("| last runner Pod gone | %.1f s |\n", s.AllGoneSeconds)
		}
		p("| runner Pods created / most at once (those being torn down included) | %d / %d |\n", s.RunnerPods, s.MaxPodsAtOnce)
		p("| runner start (`landform_runner_start_seconds`), mean | %.2f s |\n", s.RunnerStartMeanSeconds)
		p("| runs started | %d (%s) |\n", s.RunsStarted, counts(s.RunsByAction))
		p("| CPU, until the last Pod was gone | %.1f s: %s |\n", s.CPU.Total(), cpuParts(s.CPU))
		p("| CPU per object | %.2f s |\n", s.CPUPerObject)
		p("| total CPU / cores | %.1f s |\n", s.CPUBound)
		p("| machine CPU (`/proc/stat`), other processes | %.1f s, %.1f s |\n", s.MachineBusy, s.Others)
		p("| API writes per object | %.1f (%s) |\n", s.APIWritesPerObject, counts(s.APIWritesByRes))
		p("| load average at start / end | %s / %s |\n", s.LoadStart, s.LoadEnd)
		if len(s.Phases) > 0 {
			p("\nWhere the %d objects' time went, medians over the objects. *runner Pod created* includes the wait for a run slot\n", s.N)
			p("(`--concurrent-runs`); the runner's answer and `init` are in *plan* here.\n\n")
			phaseTable(p, s.Phases)
		}
	}

	p("\n### What the figures say\n\n")
	r.reading(p)
}

// reading is the section's reading of its own figures.
func (r *ClusterReport) reading(p printer) {
	o := r.One
	lf, raw := o.LandformPhases, o.RawPhases
	podStart := phaseSum(lf, "Pod scheduled", "container started")
	rawStart := phaseSum(raw, "Pod scheduled", "container started")
	before := phaseSum(lf, "run recorded", "runner Pod created")
	answering := phaseSum(lf, "runner answering")
	engine := phaseSum(lf, "init", "plan", "apply")
	between := phaseSum(lf, "apply recorded", "outputs written", "Ready")
	rawEngine := phaseSum(raw, "init", "apply")
	rawEnd := phaseSum(raw, "exit seen", "Succeeded")
	p("Landform's median phases, grouped, beside the raw engine's Pod:\n\n")
	p("| | Landform | raw engine's Pod |\n|---|---|---|\n")
	p("| before the Pod: the controller records the run and creates the Pod | %.2f s | – |\n", before)
	p("| the Pod's start: scheduled, sandbox and network, container | %.2f s | %.2f s |\n", podStart, rawStart)
	p("| the runner answering the controller | %.2f s | – |\n", answering)
	p("| the engine's work: `init`, `plan` (with `show -json` and the plan stored), `apply` | %.2f s | %.2f s (`init`, `apply`) |\n", engine, rawEngine)
	p("| the controller between and after: apply recorded, outputs written, Ready | %.2f s | – |\n", between)
	p("| the kubelet noticing the exit, phase `Succeeded` | – | %.2f s |\n", rawEnd)
	p("\n")
	p("- The Pod's start is the same work for both (%.2f s and %.2f s): the node's, not Landform's. Only fewer Pods save\n", podStart, rawStart)
	p("  it: a runner Pod serves an object's plan and the apply that follows")
	if o.PodReuse != "" {
		p(", and with `--runner-pod-reuse` the next objects' runs: the %d samples ran in %d Pod(s)", len(o.LandformSeconds), o.LandformPodsCreated)
		if s := r.Scale; s.N > 0 {
			p(", the %d objects in %d", s.N, s.RunnerPods)
		}
		p(".\n  A reused Pod's phases are the moment the controller claims it; a kept Pod costs the node nothing while it waits.\n")
	} else {
		if s := r.Scale; s.N > 0 {
			p(" (%d runner Pods for %d objects)", s.RunnerPods, s.N)
		}
		p(", and with `--runner-pod-reuse` (off in this run)\n")
		p("  the next objects' runs, taking the Pod's start off their critical path.\n")
	}
	p("- The raw engine's Pod is done before Kubernetes says so: %.2f s pass between its engine's end and phase `Succeeded`\n", rawEnd)
	p("  (%.2f s until its container's exit shows in the Pod's status, %.2f s more until the phase). Landform waits for neither:\n",
		phaseSum(raw, "exit seen"), phaseSum(raw, "Succeeded"))
	p("  its runner answers over the network, and the controller deletes the Pod after the run. Against the raw engine's end\n")
	p("  rather than its Pod's `Succeeded`, Landform takes %+.2f s.\n", o.ExtraOverEngineSeconds)
	p("- Landform's own time, in phases the raw Pod has none of: %.2f s before the Pod, %.2f s from the container's start to\n", before, answering)
	p("  the runner answering (the runner's start, seen through a watch of its Pod, and the mTLS dial), and %.2f s\n", between)
	p("  between the runs and after them (status writes, events, the outputs Secret). The engine's work is %.2f s where the raw\n", engine)
	p("  Pod's `init` and `apply` take %.2f s: Landform also plans, renders the plan as JSON and stores it, and keeps the state\n", rawEngine)
	p("  in the `kubernetes` backend where the raw Pod keeps a local file.\n")
	if s := r.Scale; s.N > 0 {
		p("- At %d objects at once, the cluster spends %.2f CPU-s per object (%s; one object alone: %.2f), and all are Ready in\n",
			s.N, s.CPUPerObject, cpuShare(s.CPU), o.LandformCPU.Total())
		p("  %.1f s on %d cores, where the CPU spent over the cores is %.1f s: the run is bound by the node's CPU as long as these\n",
			s.AllReadySeconds, r.Machine.Cores, s.CPUBound)
		p("  are close. Up to %d runner Pods ran at once; a runner Pod took %.2f s on average to answer (%.2f s alone).\n",
			s.MaxPodsAtOnce, s.RunnerStartMeanSeconds, o.RunnerStartMedian)
	}
}

// phaseTable renders phases: their samples, or with more than a few,
// their p95 and max.
func phaseTable(p printer, phases []Phase) {
	many := len(phases) > 0 && len(phases[0].Seconds) > 12
	if many {
		p("| phase | ends when | median | p95 | max |\n|---|---|---|---|---|\n")
	} else {
		p("| phase | ends when | median | samples (s) |\n|---|---|---|---|\n")
	}
	for _, ph := range phases {
		missing := ""
		if ph.Missing > 0 {
			missing = fmt.Sprintf(" (not seen in %d samples: their time is in the next phase)", ph.Missing)
		}
		if many {
			p("| %s | %s%s | %.3f s | %.3f s | %.3f s |\n", ph.Name, ph.Until, missing, ph.Median, percentile(ph.Seconds, 95), percentile(ph.Seconds, 100))
		} else {
			p("| %s | %s%s | %.3f s | %s |\n", ph.Name, ph.Until, missing, ph.Median, floats(ph.Seconds))
		}
	}
}

func phaseNames(phases []Phase) []string {
	out := make([]string, len(phases))
	for i, ph := range phases {
		out[i] = ph.Name
	}
	return out
}

// perResource renders writes per resource as "k1 n1, k2 n2" in key order.
func perResource(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " " + count(m[k])
	}
	return strings.Join(parts, ", ")
}

// cpuParts renders the parties' CPU-seconds, largest first.
func cpuParts(c ClusterCPU) string {
	parts := cpuList(c)
	out := make([]string, len(parts))
	for i, pt := range parts {
		out[i] = fmt.Sprintf("%s %.2f", pt.name, pt.v)
	}
	return strings.Join(out, ", ")
}

// cpuShare renders the largest parties' shares of the total.
func cpuShare(c ClusterCPU) string {
	parts := cpuList(c)
	total := nonZero(c.Total())
	var out []string
	for _, pt := range parts[:min(4, len(parts))] {
		out = append(out, fmt.Sprintf("%s %.0f%%", pt.name, 100*pt.v/total))
	}
	return strings.Join(out, ", ")
}

type cpuPart struct {
	name string
	v    float64
}

func cpuList(c ClusterCPU) []cpuPart {
	parts := []cpuPart{{"controller", c.Controller}, {"Pods", c.Pods}, {"kubelet", c.Kubelet}, {"containerd", c.Containerd},
		{"shims and runc", c.Shims}, {"kube-apiserver", c.APIServer}, {"etcd", c.Etcd}, {"kube-scheduler", c.Scheduler},
		{"kube-controller-manager", c.ControllerManager}}
	// Largest first; a stable insertion sort keeps equal ones in order.
	for i := 1; i < len(parts); i++ {
		for j := i; j > 0 && parts[j].v > parts[j-1].v; j-- {
			parts[j], parts[j-1] = parts[j-1], parts[j]
		}
	}
	return parts
}

func nonZero(x float64) float64 {
	if x == 0 {
		return 1
	}
	return x
}
