package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Report is everything one `make bench` run measured; it is written as
// docs/benchmarks.json and rendered as docs/benchmarks.md.
type Report struct {
	Date          string      `json:"date"`
	Revision      string      `json:"revision"`
	Machine       Machine     `json:"machine"`
	Config        Config      `json:"config"`
	EngineWrapper WrapperCost `json:"engineWrapper"`
	// Overhead is on the trivial module, OverheadCloud on the module using
	// the stand-in cloud's provider.
	Overhead      Overhead `json:"overhead"`
	OverheadCloud Overhead `json:"overheadCloud"`
	Init          Init     `json:"init"`
	Scale         Scale    `json:"scale"`
	NewRev        NewRev   `json:"newRevision"`
	Idle          Idle     `json:"idle"`
	Restart       Restart  `json:"restart"`
	Drift         Drift    `json:"drift"`
	// UIList is nil in a report from before it was measured.
	UIList *UIList `json:"uiList,omitempty"`
	// OneObjectWrites is measured apart (BENCH_ONLY=writes), nil until
	// then; OneObjectWritesBefore is the one it replaced, of another
	// revision, for a table before and after a change.
	OneObjectWrites       *OneObjectWrites `json:"oneObjectWrites,omitempty"`
	OneObjectWritesBefore *OneObjectWrites `json:"oneObjectWritesBefore,omitempty"`
	Targets               []Target         `json:"targets"`
}

// WrapperCost is what the engine-counting wrapper adds to each engine
// process: medians of /bin/true through it less /bin/true alone.
type WrapperCost struct {
	WallMillis float64 `json:"wallMillis"`
	CPUMillis  float64 `json:"cpuMillis"`
	Samples    int     `json:"samples"`
}

// Init is `tofu init` of the cloud module with Landform's read-only
// filesystem mirror (providers used in place) and without it (the provider
// downloaded from a network mirror on loopback and unpacked into
// .terraform each time, as from a registry).
type Init struct {
	WithMirror    InitCase `json:"withReadOnlyMirror"`
	WithoutMirror InitCase `json:"withNetworkMirror"`
	// Ratio is WithoutMirror's median over WithMirror's.
	Ratio float64 `json:"ratio"`
}

// InitCase is one way of installing the provider.
type InitCase struct {
	Seconds    []float64 `json:"seconds"`
	CPUSeconds []float64 `json:"cpuSeconds"`
	Median     float64   `json:"medianSeconds"`
	CPUMedian  float64   `json:"medianCPUSeconds"`
	// ProviderBytes is what .terraform/providers holds in regular files
	// (not links) after the last sample: what init copied.
	ProviderBytes int64 `json:"providerBytes"`
}

// Machine describes where the run happened.
type Machine struct {
	CPUModel   string  `json:"cpuModel"`
	Cores      int     `json:"cores"`
	MemoryGiB  float64 `json:"memoryGiB"`
	Kernel     string  `json:"kernel"`
	Go         string  `json:"go"`
	Engine     string  `json:"engine"`
	LoadStart  string  `json:"loadAverageAtStart"`
	LoadEnd    string  `json:"loadAverageAtEnd"`
	OthersCPUs float64 `json:"otherProcessesCPUSecondsDuringScale"`
}

// Config is how the run was set up.
type Config struct {
	N              int     `json:"n"`
	Samples        int     `json:"samples"`
	Concurrent     int     `json:"concurrent"`
	ConcurrentRuns int     `json:"concurrentRuns"`
	IdleWindowS    float64 `json:"idleWindowSeconds"`
	RestartWindowS float64 `json:"restartWindowSeconds"`
	Interval       string  `json:"interval"`
}

// Overhead compares one object through Landform with the raw engine doing
// the same work, sample by sample, in the same run.
type Overhead struct {
	RawSeconds         []float64 `json:"rawSeconds"`
	LandformSeconds    []float64 `json:"landformSeconds"`
	RawMedian          float64   `json:"rawMedianSeconds"`
	LandformMedian     float64   `json:"landformMedianSeconds"`
	Ratio              float64   `json:"ratio"`
	RawCPUPerRun       float64   `json:"rawMachineCPUSecondsPerRun"`
	RawEngineCPUPerRun float64   `json:"rawEngineCPUSecondsPerRun"`
	RawAPIWritesPerRun float64   `json:"rawAPIWritesPerRun"`
	LandformCPUPerObj  float64   `json:"landformMachineCPUSecondsPerObject"`
	// RunnerStartSeconds is the mean time from asking for a local runner
	// to its health check answering (process, certificates, mTLS): what a
	// pool of warm runners could save at most, per run.
	RunnerStartSeconds float64 `json:"runnerStartSeconds"`
	// Module is "one" (trivial) or "cloud".
	Module string `json:"module,omitempty"`
	// Engine processes by subcommand, per raw run and per Landform object.
	RawEngineProcs      map[string]float64 `json:"rawEngineProcessesPerRun,omitempty"`
	LandformEngineProcs map[string]float64 `json:"landformEngineProcessesPerObject,omitempty"`
	// CloudResourcesChecked is how many samples' security groups were
	// found created exactly once in the stand-in cloud (the bench fails
	// otherwise).
	CloudResourcesChecked int `json:"cloudResourcesChecked,omitempty"`
}

// CPU is CPU-seconds spent by each party over a phase.
type CPU struct {
	Controller float64 `json:"controller"`
	Runners    float64 `json:"runnersAndEngine"`
	APIServer  float64 `json:"apiServer"`
	Etcd       float64 `json:"etcd"`
}

// Total is the machine-wide CPU of Landform's work.
func (c CPU) Total() float64 { return c.Controller + c.Runners + c.APIServer + c.Etcd }

// Scale is N objects created at once on one GitRepository.
type Scale struct {
	N                  int            `json:"n"`
	AllReadySeconds    float64        `json:"allReadySeconds"`
	P50Seconds         float64        `json:"p50Seconds"`
	P95Seconds         float64        `json:"p95Seconds"`
	MaxSeconds         float64        `json:"maxSeconds"`
	CPU                CPU            `json:"cpuSeconds"`
	CPUPerObject       float64        `json:"machineCPUSecondsPerObject"`
	CPUBound           float64        `json:"cpuBoundSeconds"`
	ControllerPeakMiB  float64        `json:"controllerPeakRSSMiB"`
	RunsStarted        int            `json:"runsStarted"`
	RunsByAction       map[string]int `json:"runsByAction"`
	ArtifactDownloads  int            `json:"artifactDownloads"`
	APIWrites          int            `json:"apiWrites"`
	APIWritesPerObject float64        `json:"apiWritesPerObject"`
	APIWritesByRes     map[string]int `json:"apiWritesByResource"`
	// EngineProcs is engine processes by subcommand over the phase.
	EngineProcs          map[string]int `json:"engineProcesses"`
	EngineProcsPerObject float64        `json:"engineProcessesPerObject"`
}

// NewRev is a new source revision for all N objects.
type NewRev struct {
	AllReadySeconds    float64        `json:"allReadySeconds"`
	P50Seconds         float64        `json:"p50Seconds"`
	P95Seconds         float64        `json:"p95Seconds"`
	CPU                CPU            `json:"cpuSeconds"`
	RunsStarted        int            `json:"runsStarted"`
	ArtifactDownloads  int            `json:"artifactDownloads"`
	APIWritesPerObject float64        `json:"apiWritesPerObject"`
	EngineProcs        map[string]int `json:"engineProcesses"`
}

// Idle is a window with nothing changed after convergence.
type Idle struct {
	WindowSeconds   float64        `json:"windowSeconds"`
	RunsStarted     int            `json:"runsStarted"`
	ControllerCPU   float64        `json:"controllerCPUSeconds"`
	ControllerCores float64        `json:"controllerCores"`
	APIWrites       int            `json:"apiWrites"`
	APIWritesByRes  map[string]int `json:"apiWritesByResource"`
	EngineProcs     int            `json:"engineProcesses"`
}

// Restart is the controller restarted with N converged objects.
type Restart struct {
	WindowSeconds     float64        `json:"windowSeconds"`
	RunsStarted       int            `json:"runsStarted"`
	Budget            int            `json:"budget"`
	CPU               CPU            `json:"cpuSeconds"`
	APIWrites         int            `json:"apiWrites"`
	APIWritesByRes    map[string]int `json:"apiWritesByResource"`
	EngineProcs       int            `json:"engineProcesses"`
	ControllerPeakMiB float64        `json:"controllerPeakRSSMiB"`
}

// Target is one of issue 12's targets with what this run measured.
type Target struct {
	Name     string `json:"name"`
	Want     string `json:"want"`
	Measured string `json:"measured"`
	// Met is nil where this run cannot tell (the target is for a larger N).
	Met  *bool  `json:"met"`
	Note string `json:"note,omitempty"`
	// Why explains a target not met; copied from -notes (hack/bench/notes.json).
	Why string `json:"why,omitempty"`
}

// percentile is the p-th percentile (0..100) of xs, interpolated linearly
// between the closest ranks; 0 for no samples (JSON has no NaN).
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 1 {
		return s[0]
	}
	rank := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(rank))
	hi := int(math.Ceil(rank))
	return s[lo] + (s[hi]-s[lo])*(rank-float64(lo))
}

func median(xs []float64) float64 { return percentile(xs, 50) }

// ratio is a/b, 0 when b is not positive (JSON has no NaN or Inf).
func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// targets checks the targets against what was measured.
// minGapShare is the shortest time between two drift checks of one object
// that is not a run between drift intervals, as a share of the interval:
// the jitter (5% by default) less a margin for the time a run takes to be
// seen.
const minGapShare = 0.9

// oneObjectTarget is the most one object's time may be of the raw
// engine's: issue 36's 1.25× (issue 12 had asked for 1.5×, which the cloud
// provider module is still held to).
const oneObjectTarget = 1.25

func (r *Report) targets() []Target {
	yes := func(b bool) *bool { return &b }
	cores := float64(r.Machine.Cores)
	cpuRatio := ratio(r.Scale.CPUPerObject, r.Overhead.RawCPUPerRun)
	bound := 1.2 * r.Scale.CPU.Total() / cores
	ts := []Target{
		{
			Name: "one object", Want: fmt.Sprintf("≤ %.3g× the raw engine", oneObjectTarget),
			Measured: fmt.Sprintf("%.2f s vs %.2f s: %.2f×", r.Overhead.LandformMedian, r.Overhead.RawMedian, r.Overhead.Ratio),
			Met:      yes(r.Overhead.Ratio <= oneObjectTarget),
		},
		{
			Name: "one object, cloud provider module", Want: "≤ 1.5× the raw engine",
			Measured: fmt.Sprintf("%.2f s vs %.2f s: %.2f×", r.OverheadCloud.LandformMedian, r.OverheadCloud.RawMedian, r.OverheadCloud.Ratio),
			Met:      yes(r.OverheadCloud.Ratio <= 1.5),
		},
		{
			Name: "machine-wide CPU per object", Want: "≤ 1.5× the raw engine's (engine + API server + etcd), at 200 objects",
			Measured: fmt.Sprintf("%.3f CPU-s vs %.3f CPU-s: %.2f× (N=%d)", r.Scale.CPUPerObject, r.Overhead.RawCPUPerRun, cpuRatio, r.Scale.N),
			Met:      yes(cpuRatio <= 1.5),
		},
		{
			Name: "all Ready", Want: "within 1.2× (total CPU / cores), at 200 objects",
			Measured: fmt.Sprintf("%.1f s vs 1.2 × %.1f CPU-s / %d = %.1f s (N=%d)", r.Scale.AllReadySeconds, r.Scale.CPU.Total(), r.Machine.Cores, bound, r.Scale.N),
			Met:      yes(r.Scale.AllReadySeconds <= bound),
		},
		{
			Name: "controller peak RSS", Want: "≤ 300 MiB at 1000 objects",
			Measured: fmt.Sprintf("%.0f MiB (N=%d)", r.Scale.ControllerPeakMiB, r.Scale.N),
			Met:      yes(r.Scale.ControllerPeakMiB <= 300),
		},
		{
			Name: "artifact downloads", Want: "one per digest",
			Measured: fmt.Sprintf("%d for 1 digest (N=%d); %d for the new revision", r.Scale.ArtifactDownloads, r.Scale.N, r.NewRev.ArtifactDownloads),
			Met:      yes(r.Scale.ArtifactDownloads <= 1 && r.NewRev.ArtifactDownloads <= 1),
		},
		{
			Name: "idle", Want: "zero runs between drift intervals",
			Measured: fmt.Sprintf("%d runs, %d engine processes in %.0f s", r.Idle.RunsStarted, r.Idle.EngineProcs, r.Idle.WindowSeconds),
			Met:      yes(r.Idle.RunsStarted == 0 && r.Idle.EngineProcs == 0),
		},
		{
			Name: "restart", Want: fmt.Sprintf("no more runs than the budget (--concurrent-runs=%d)", r.Restart.Budget),
			Measured: fmt.Sprintf("%d runs in the first %.0f s", r.Restart.RunsStarted, r.Restart.WindowSeconds),
			Met:      yes(r.Restart.RunsStarted <= r.Restart.Budget),
		},
	}
	if d := r.Drift; d.Objects > 0 {
		ts = append(ts, Target{
			Name: "drift checks", Want: "zero runs between drift intervals: one drift check per object per interval",
			Measured: fmt.Sprintf("%d runs of %d objects in %.0f s at a %.0f s interval, all drift checks: %v; between two checks of one object min %.1f s, median %.1f s",
				d.Runs, d.Objects, d.WindowSeconds, d.IntervalSeconds, d.DriftRuns == d.Runs, d.MinGapSeconds, d.MedianGapSeconds),
			Met: yes(d.DriftRuns == d.Runs && d.MinGapSeconds >= minGapShare*d.IntervalSeconds),
		})
	}
	// The scale targets are for one N: at another, say what this N shows.
	for i, at := range map[int]int{2: 200, 3: 200, 4: 1000} {
		if r.Scale.N != at {
			ts[i].Note = fmt.Sprintf("measured at N=%d, not %d; %s at this N", r.Scale.N, at, metWord(*ts[i].Met))
			ts[i].Met = nil
		}
	}
	if r.UIList != nil {
		ts = append(ts, r.UIList.target())
	}
	return ts
}

// applyNotes copies notes[target name] into each target not met as its
// Why; a target without a note keeps the Why it has.
func (r *Report) applyNotes(notes map[string]string) {
	for i, t := range r.Targets {
		if why := strings.TrimSpace(notes[t.Name]); why != "" && t.Met != nil && !*t.Met {
			r.Targets[i].Why = why
		}
	}
}

// sortByN sorts scale runs, and their paths with them, by N.
func sortByN(runs []*Report, paths []string) {
	idx := make([]int, len(runs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return runs[idx[a]].Scale.N < runs[idx[b]].Scale.N })
	r2, p2 := make([]*Report, len(runs)), make([]string, len(paths))
	for i, j := range idx {
		r2[i], p2[i] = runs[j], paths[j]
	}
	copy(runs, r2)
	copy(paths, p2)
}

func metWord(b bool) string {
	if b {
		return "met"
	}
	return "not met"
}

// writeJSON writes a report (a Report or a ClusterReport) as indented
// JSON.
func writeJSON(w io.Writer, report any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(report)
}

// printer appends formatted text.
type printer func(format string, a ...any)

// writeMarkdown renders r as docs/benchmarks.md, with the scale runs kept
// beside it (docs/benchmarks-<N>.json) in their own section.
func (r *Report) writeMarkdown(w io.Writer, scaleRuns ...*Report) error {
	return r.writeMarkdownWith(w, nil, nil, scaleRuns...)
}

// writeMarkdownWith is writeMarkdown with `make bench-cluster`'s run, if
// any, in a section of its own.
func (r *Report) writeMarkdownWith(w io.Writer, cluster *ClusterReport, peer *ClusterComparison, scaleRuns ...*Report) error {
	var b strings.Builder
	p := printer(func(format string, a ...any) { fmt.Fprintf(&b, format, a...) })
	p("# Benchmarks\n\n")
	p("Generated by `make bench` (`hack/bench`) on %s, from %s; the figures are also in [benchmarks.json](benchmarks.json).\n", r.Date, r.Revision)
	p("Run it yourself with `make bench`; `BENCH_N=200 make bench` and `BENCH_N=1000 make bench` add the [scale runs](#scale-runs)\n")
	p("(docs/benchmarks-200.json and docs/benchmarks-1000.json) and render this page again with them.\n")
	if cluster != nil {
		p("The same trivial module with runner Pods on a real single-node cluster, `make bench-cluster`, is [below](#runner-pods-on-a-real-cluster).\n")
	}
	p("\n")

	p("## Machine\n\n")
	r.machineTable(p)
	p("The machine may be shared: the load average and the CPU other processes used during the scale phase (from `/proc/stat`,\n")
	p("less everything measured here and the harness) say how much of it the run had; wall times suffer from it, CPU-seconds hardly.\n\n")

	p("## Method\n\n")
	p("The harness starts its own control plane as the integration tests do: a real kube-apiserver and etcd (envtest, `bin/`),\n")
	p("and an HTTP artifact server that publishes the module as a GitRepository's artifact the way source-controller does\n")
	p("(no source-controller; the GitRepository status is written by the harness). Landform is the real `bin/landform-controller`\n")
	p("as a child process with `--runner=local` (runners are its child processes, running `bin/tofu`), `--concurrent=%d`,\n", r.Config.Concurrent)
	p("`--concurrent-runs=%d` and `--provider-mirror=bin/providers`. Every object is auto-approved, writes its outputs to a Secret,\n", r.Config.ConcurrentRuns)
	p("and has `interval: %s`. The state is in Terraform's `kubernetes` backend on the same API server.\n", r.Config.Interval)
	p("Two modules: the *trivial* one (one `terraform_data`, two outputs) for every phase, and the *cloud* one for the overhead\n")
	p("and init phases: one `landform_security_group` in the stand-in cloud (`internal/cloud`, the server `bin/landform-cloud` runs,\n")
	p("here in the harness on loopback) through the project's provider (`providers/landform`) from the read-only filesystem mirror\n")
	p("`bin/providers`, named after the object (`var.name`), with the same two outputs. Everything is on loopback with `CHECKPOINT_DISABLE=1`.\n\n")
	p("Times are taken from watches (a controller-runtime watch on Terraform objects and on Secrets), never by polling:\n")
	p("an object is done when it is Ready at its generation with no run in flight and its outputs Secret holds both outputs.\n")
	p("A run is counted when a new `status.run.id` appears on an object (the controller records every run there before it starts).\n")
	p("CPU is read from `/proc/<pid>/stat`: the controller's own utime+stime; runners and engine as the controller's reaped children\n")
	p("(cutime+cstime) plus its live descendants; the envtest kube-apiserver and etcd processes. Peak RSS is the controller's VmHWM.\n")
	p("API writes are the API server's `apiserver_request_total` for POST, PUT, PATCH, DELETE and APPLY before and after, from its\n")
	p("`/metrics` endpoint, less the harness's own creates and status updates; they include the API server's own identity Lease\n")
	p("renewals (one every 10 s). Artifact downloads are counted by the artifact server.\n\n")
	p("Engine processes are counted by a wrapper (`hack/bench/enginecount`, built by the harness as `tofu-<version>` so that the\n")
	p("runner still knows the engine and its version by its name, as it knows `bin/tofu`'s from its build information) that both\n")
	p("the raw engine and Landform's runners (`--engine`) run: it appends one line,\n")
	p("who ran it, the subcommand and when it started (which places it in an object's timeline), to a file with `O_APPEND` and\n")
	p("then `exec`s the real `bin/tofu` in the same process, so CPU\n")
	p("accounting is unchanged. Both sides pay its cost on every process: %.1f ms wall and %.1f ms CPU (median of %d runs of\n",
		r.EngineWrapper.WallMillis, r.EngineWrapper.CPUMillis, r.EngineWrapper.Samples)
	p("`/bin/true` through it less `/bin/true` alone, on this machine). A runner starts every engine process through terraform-exec\n")
	p("and a launcher (`runner/internal/engineproc`, a shell script) that becomes the engine; the launcher also answers\n")
	p("terraform-exec's version check, once per runner, without the engine. That answer is not counted here; its CPU is in the\n")
	p("runners'.\n\n")
	p("1. **Overhead**: %d samples per module, alternating: the raw engine (`tofu init`, `plan -out`, `apply`, `output -json` in a\n", r.Config.Samples)
	p("   fresh directory with the same module, the `kubernetes` backend on the same API server and the CLI configuration Landform's\n")
	p("   runners write: the mirrored provider only from the read-only mirror), then one new Landform object created and waited for\n")
	p("   (create → Ready + outputs Secret). Medians and their ratio. The first Landform sample of each module includes the\n")
	p("   controller's first download of that module's artifact. After the cloud module's samples the harness checks, through the\n")
	p("   cloud's API, that every sample's security group was created exactly once (the bench fails otherwise).\n")
	p("2. **Init**: `tofu init` of the cloud module (no backend) in a fresh directory, %d samples each, alternating: *with* the\n", r.Config.Samples)
	p("   read-only mirror (Landform's CLI configuration: the provider is linked from the mirror in place) and *without* it: from\n")
	p("   a provider network mirror served by the harness over HTTPS on loopback, holding the same provider as the zip archive a\n")
	p("   registry serves, so that init downloads, unpacks and writes the provider into `.terraform` every time, as it does from\n")
	p("   a registry (less the internet's latency and bandwidth).\n")
	p("3. **Scale**: N=%d objects created at once (8 clients in parallel) on one GitRepository; all-Ready time from the first\n", r.Config.N)
	p("   create, p50/p95 latency.\n")
	p("4. **New revision**: a new artifact (same module, new revision and digest) for the same GitRepository; time until every object\n")
	p("   has applied it.\n")
	p("5. **Idle**: %.0f s with nothing changed after convergence (no drift interval elapses in it).\n", r.Config.IdleWindowS)
	p("6. **Restart**: the controller is stopped (SIGTERM) and started again on the same work directory with N converged objects;\n")
	p("   runs started in the first %.0f s.\n", r.Config.RestartWindowS)
	if d := r.Drift; d.Objects > 0 {
		p("7. **Drift checks**: the N objects' `interval` set to %.0f s (their last check is older: one is due at once), nothing else\n", d.IntervalSeconds)
		p("   changed; runs watched for %d intervals and a half, and the time between two runs of the same object.\n", d.Intervals)
	}
	if u := r.UIList; u != nil {
		u.method(p, 7+min(r.Drift.Objects, 1))
	}
	p("\n")

	p("## Targets\n\n")
	r.targetsTable(p)

	p("\n## Overhead: one object\n\n")
	p("| module | raw engine: median | Landform: median | ratio | raw samples (s) | Landform samples (s) |\n|---|---|---|---|---|---|\n")
	for _, c := range []struct {
		name string
		o    Overhead
	}{{"trivial", r.Overhead}, {"cloud provider", r.OverheadCloud}} {
		p("| %s | %.2f s | %.2f s | **%.2f×** | %s | %s |\n", c.name, c.o.RawMedian, c.o.LandformMedian, c.o.Ratio, floats(c.o.RawSeconds), floats(c.o.LandformSeconds))
	}
	p("\n| per run or object | trivial | cloud provider |\n|---|---|---|\n")
	p("| raw engine: engine CPU | %.3f s | %.3f s |\n", r.Overhead.RawEngineCPUPerRun, r.OverheadCloud.RawEngineCPUPerRun)
	p("| raw engine: machine-wide CPU (engine + API server + etcd) | %.3f s | %.3f s |\n", r.Overhead.RawCPUPerRun, r.OverheadCloud.RawCPUPerRun)
	p("| raw engine: API writes | %.0f | %.0f |\n", r.Overhead.RawAPIWritesPerRun, r.OverheadCloud.RawAPIWritesPerRun)
	p("| Landform, one at a time: machine-wide CPU (controller + runners and engine + API server + etcd) | %.3f s | %.3f s |\n",
		r.Overhead.LandformCPUPerObj, r.OverheadCloud.LandformCPUPerObj)
	if o := r.Overhead; o.RunnerStartSeconds > 0 {
		p("| Landform: runner start (process, certificates, mTLS health check), mean | %.0f ms | %.0f ms |\n",
			o.RunnerStartSeconds*1000, r.OverheadCloud.RunnerStartSeconds*1000)
		p("\nA pool of warm local runners would save at most the runner start per object: %.0f ms of the trivial module's %.2f s (%.0f%%).\n",
			o.RunnerStartSeconds*1000, o.LandformMedian, 100*o.RunnerStartSeconds/o.LandformMedian)
		if o.RunnerStartSeconds/o.LandformMedian < 0.1 {
			p("It is not built: it would keep idle processes (and their memory) per engine and version for at most that.\n")
		} else {
			p("That is a tenth or more of the whole: a pool would pay here.\n")
		}
	}
	if r.OverheadCloud.CloudResourcesChecked > 0 {
		p("\nIn the stand-in cloud, each of the %d samples of the cloud module (raw and Landform) created its security group exactly once.\n",
			r.OverheadCloud.CloudResourcesChecked)
	}

	p("\n## Engine processes\n\n")
	r.engineTable(p)

	in := r.Init
	p("\n## Init: with and without the read-only mirror\n\n")
	p("`tofu init` of the cloud module, %d samples each.\n\n", len(in.WithMirror.Seconds))
	p("| provider from | median | engine CPU (median) | copied into `.terraform/providers` | samples (s) |\n|---|---|---|---|---|\n")
	p("| read-only filesystem mirror, used in place (Landform) | %.2f s | %.2f s | %s | %s |\n", in.WithMirror.Median, in.WithMirror.CPUMedian, mib(in.WithMirror.ProviderBytes), floats(in.WithMirror.Seconds))
	p("| network mirror on loopback: downloaded and unpacked | %.2f s | %.2f s | %s | %s |\n", in.WithoutMirror.Median, in.WithoutMirror.CPUMedian, mib(in.WithoutMirror.ProviderBytes), floats(in.WithoutMirror.Seconds))
	p("\nWithout the mirror, init takes **%.2f×** as long, before any network latency.\n", in.Ratio)

	p("\n## Scale: %d objects on one GitRepository\n\n", r.Scale.N)
	r.scaleTables(p, "###")

	if u := r.UIList; u != nil {
		u.writeMarkdown(p, r)
	}
	if w := r.OneObjectWrites; w != nil {
		w.writeMarkdown(p, r.OneObjectWritesBefore)
	}

	p("\n## Scale runs\n\n")
	if len(scaleRuns) == 0 {
		p("None kept yet: `BENCH_N=200 make bench` and `BENCH_N=1000 make bench` write docs/benchmarks-200.json and\n")
		p("docs/benchmarks-1000.json and render them here.\n")
	} else {
		p("Runs of `BENCH_N=<N> make bench`, kept as docs/benchmarks-<N>.json; each is a whole run (its overhead phase included),\n")
		p("of which the targets and the phases that scale with N are shown here.\n")
	}
	for _, s := range scaleRuns {
		p("\n### %d objects\n\n", s.Scale.N)
		p("Generated on %s, from %s ([benchmarks-%d.json](benchmarks-%d.json)).\n\n", s.Date, s.Revision, s.Scale.N, s.Scale.N)
		s.machineTable(p)
		p("#### Targets\n\n")
		s.targetsTable(p)
		p("\n#### Scale\n\n")
		s.scaleTables(p, "####")
	}

	if cluster != nil {
		cluster.writeMarkdown(p)
		if peer != nil {
			peer.writeMarkdown(p)
		}
	}

	var missing []string
	if !hasN(scaleRuns, 200) || !hasN(scaleRuns, 1000) {
		missing = append(missing, "The scale runs not listed above: `BENCH_N=200 make bench` and `BENCH_N=1000 make bench` run them.")
	}
	if r.Drift.Objects == 0 {
		missing = append(missing, "Runs per drift interval: the drift phase was skipped (`-drift-interval=0`).")
	}
	if len(missing) > 0 {
		p("\n## Not measured yet\n\n")
		for _, m := range missing {
			p("- %s\n", m)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func hasN(runs []*Report, n int) bool {
	for _, r := range runs {
		if r.Scale.N == n {
			return true
		}
	}
	return false
}

func (r *Report) machineTable(p printer) {
	p("| | |\n|---|---|\n")
	p("| CPU | %d × %s |\n", r.Machine.Cores, r.Machine.CPUModel)
	p("| memory | %.1f GiB |\n", r.Machine.MemoryGiB)
	p("| kernel | %s |\n", r.Machine.Kernel)
	p("| Go | %s |\n", r.Machine.Go)
	p("| engine | %s |\n", r.Machine.Engine)
	p("| load average at start / end | %s / %s |\n", r.Machine.LoadStart, r.Machine.LoadEnd)
	p("| CPU-s used by other processes during the scale phase | %.1f |\n\n", r.Machine.OthersCPUs)
}

// targetsTable is the targets, then why each one not met is not.
func (r *Report) targetsTable(p printer) {
	p("| target | wanted | measured | met |\n|---|---|---|---|\n")
	var why []Target
	for _, t := range r.Targets {
		met := "—"
		if t.Met != nil {
			met = map[bool]string{true: "yes", false: "**no**"}[*t.Met]
		}
		if t.Note != "" {
			met += " (" + t.Note + ")"
		}
		p("| %s | %s | %s | %s |\n", t.Name, t.Want, t.Measured, met)
		if t.Met != nil && !*t.Met {
			why = append(why, t)
		}
	}
	if len(why) == 0 {
		return
	}
	p("\nNot met:\n\n")
	for _, t := range why {
		text := t.Why
		if text == "" {
			text = "no explanation recorded yet (hack/bench/notes.json)."
		}
		p("- **%s**: %s\n", t.Name, text)
	}
}

// engineTable is engine processes by subcommand: per raw run, per
// Landform object on its own and per object at scale.
func (r *Report) engineTable(p printer) {
	subs := map[string]bool{}
	for _, m := range []map[string]float64{r.Overhead.RawEngineProcs, r.Overhead.LandformEngineProcs, r.OverheadCloud.RawEngineProcs, r.OverheadCloud.LandformEngineProcs} {
		for k := range m {
			subs[k] = true
		}
	}
	scale := perObject(r.Scale.EngineProcs, r.Scale.N)
	for k := range scale {
		subs[k] = true
	}
	p("Per raw run and per Landform object, by subcommand (the wrapper's count; see Method).\n\n")
	p("| subcommand | raw engine, trivial | Landform, trivial | raw engine, cloud | Landform, cloud | Landform at scale (N=%d), per object |\n", r.Scale.N)
	p("|---|---|---|---|---|---|\n")
	total := make([]float64, 5)
	for _, k := range subcommandOrder(subs) {
		row := []float64{r.Overhead.RawEngineProcs[k], r.Overhead.LandformEngineProcs[k], r.OverheadCloud.RawEngineProcs[k], r.OverheadCloud.LandformEngineProcs[k], scale[k]}
		cells := make([]string, len(row))
		for i, v := range row {
			total[i] += v
			cells[i] = count(v)
		}
		p("| `%s` | %s |\n", k, strings.Join(cells, " | "))
	}
	cells := make([]string, len(total))
	for i, v := range total {
		cells[i] = "**" + count(v) + "**"
	}
	p("| all | %s |\n", strings.Join(cells, " | "))
	raw, lf := r.Overhead.RawEngineProcs, r.Overhead.LandformEngineProcs
	if extra := beyond(raw, lf, "+"); extra != "" {
		p("\nBeyond the raw engine's processes, Landform runs %s per object (trivial module)", extra)
		if fewer := beyond(lf, raw, "−"); fewer != "" {
			p(", and not %s", fewer)
		}
		p(".\n")
	}
	if r.NewRev.EngineProcs != nil {
		p("\nNew revision: %s engine processes for %d objects (%s); idle: %d; restart window: %d.\n",
			count(float64(sum(r.NewRev.EngineProcs))), r.Scale.N, counts(r.NewRev.EngineProcs), r.Idle.EngineProcs, r.Restart.EngineProcs)
	}
}

// beyond lists, in run order, the subcommands more runs more often than
// base, with how many more after sign: "`show` (+1)".
func beyond(base, more map[string]float64, sign string) string {
	subs := map[string]bool{}
	for k, v := range more {
		if v > base[k] {
			subs[k] = true
		}
	}
	var parts []string
	for _, k := range subcommandOrder(subs) {
		parts = append(parts, fmt.Sprintf("`%s` (%s%s)", k, sign, count(more[k]-base[k])))
	}
	return strings.Join(parts, ", ")
}

// subcommandOrder is the engine's subcommands in the order of a run, then
// any others.
func subcommandOrder(subs map[string]bool) []string {
	order := []string{"version", "init", "workspace", "validate", "plan", "show", "apply", "output", "state", "force-unlock"}
	rank := map[string]int{}
	for i, k := range order {
		rank[k] = i + 1
	}
	out := make([]string, 0, len(subs))
	for k := range subs {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		ri, rj := rank[out[i]], rank[out[j]]
		if ri == 0 {
			ri = len(order) + 1
		}
		if rj == 0 {
			rj = len(order) + 1
		}
		if ri != rj {
			return ri < rj
		}
		return out[i] < out[j]
	})
	return out
}

func perObject(m map[string]int, n int) map[string]float64 {
	out := map[string]float64{}
	if n <= 0 {
		return out
	}
	for k, v := range m {
		out[k] = float64(v) / float64(n)
	}
	return out
}

// count renders a count or an average of counts: 4, 0.25, 1.33; "0" as "–".
func count(x float64) string {
	if x == 0 {
		return "–"
	}
	return strconv.FormatFloat(math.Round(x*100)/100, 'f', -1, 64)
}

func mib(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// scaleTables is the scale, new revision, idle and restart phases.
func (r *Report) scaleTables(p printer, h string) {
	s := r.Scale
	p("| | |\n|---|---|\n")
	p("| all Ready | %.1f s |\n", s.AllReadySeconds)
	p("| latency p50 / p95 / max | %.1f s / %.1f s / %.1f s |\n", s.P50Seconds, s.P95Seconds, s.MaxSeconds)
	p("| CPU: controller | %.1f s |\n", s.CPU.Controller)
	p("| CPU: runners and engine | %.1f s |\n", s.CPU.Runners)
	p("| CPU: API server | %.1f s |\n", s.CPU.APIServer)
	p("| CPU: etcd | %.1f s |\n", s.CPU.Etcd)
	p("| machine-wide CPU per object | %.3f s |\n", s.CPUPerObject)
	p("| total CPU / cores | %.1f s |\n", s.CPUBound)
	p("| controller peak RSS | %.0f MiB |\n", s.ControllerPeakMiB)
	p("| runs started | %d (%s) |\n", s.RunsStarted, counts(s.RunsByAction))
	p("| engine processes per object | %s (%s in all) |\n", count(s.EngineProcsPerObject), counts(s.EngineProcs))
	p("| artifact downloads | %d |\n", s.ArtifactDownloads)
	p("| API writes per object | %.1f (%s) |\n", s.APIWritesPerObject, counts(s.APIWritesByRes))

	n := r.NewRev
	p("\n%s New revision for all %d objects\n\n", h, s.N)
	p("| | |\n|---|---|\n")
	p("| all applied | %.1f s |\n", n.AllReadySeconds)
	p("| latency p50 / p95 | %.1f s / %.1f s |\n", n.P50Seconds, n.P95Seconds)
	p("| CPU: controller / runners and engine / API server / etcd | %.1f / %.1f / %.1f / %.1f s |\n", n.CPU.Controller, n.CPU.Runners, n.CPU.APIServer, n.CPU.Etcd)
	p("| runs started | %d |\n", n.RunsStarted)
	p("| engine processes | %d (%s) |\n", sum(n.EngineProcs), counts(n.EngineProcs))
	p("| artifact downloads | %d |\n", n.ArtifactDownloads)
	p("| API writes per object | %.1f |\n", n.APIWritesPerObject)

	i := r.Idle
	p("\n%s Idle\n\n", h)
	p("%.0f s after convergence with nothing changed: **%d runs** started, %d engine processes, controller %.2f CPU-s (%.3f cores), %d API writes (%s).\n",
		i.WindowSeconds, i.RunsStarted, i.EngineProcs, i.ControllerCPU, i.ControllerCores, i.APIWrites, counts(i.APIWritesByRes))

	rs := r.Restart
	p("\n%s Restart\n\n", h)
	p("Controller restarted with %d converged objects: **%d runs** started in the first %.0f s (budget %d), %d engine processes;\n",
		s.N, rs.RunsStarted, rs.WindowSeconds, rs.Budget, rs.EngineProcs)
	p("CPU in that window: controller %.2f s, runners and engine %.2f s, API server %.2f s, etcd %.2f s; %d API writes (%s); controller peak RSS %.0f MiB.\n",
		rs.CPU.Controller, rs.CPU.Runners, rs.CPU.APIServer, rs.CPU.Etcd, rs.APIWrites, counts(rs.APIWritesByRes), rs.ControllerPeakMiB)

	if d := r.Drift; d.Objects > 0 {
		p("\n%s Drift checks\n\n", h)
		p("Interval %.0f s, %d objects, %.0f s watched: **%d runs** (%d drift checks), %d to %d per object; between two checks of one object\n",
			d.IntervalSeconds, d.Objects, d.WindowSeconds, d.Runs, d.DriftRuns, d.MinPerObject, d.MaxPerObject)
		p("min %.1f s, median %.1f s. %d engine processes; CPU: controller %.2f s, runners and engine %.2f s, API server %.2f s, etcd %.2f s.\n",
			d.MinGapSeconds, d.MedianGapSeconds, d.EngineProcs, d.CPU.Controller, d.CPU.Runners, d.CPU.APIServer, d.CPU.Etcd)
	}
}

func floats(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, ", ")
}

// counts renders a map as "k1 n1, k2 n2" in key order.
func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
