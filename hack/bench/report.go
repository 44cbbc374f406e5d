package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// Report is everything one `make bench` run measured; it is written as
// docs/benchmarks.json and rendered as docs/benchmarks.md.
type Report struct {
	Date     string   `json:"date"`
	Revision string   `json:"revision"`
	Machine  Machine  `json:"machine"`
	Config   Config   `json:"config"`
	Overhead Overhead `json:"overhead"`
	Scale    Scale    `json:"scale"`
	NewRev   NewRev   `json:"newRevision"`
	Idle     Idle     `json:"idle"`
	Restart  Restart  `json:"restart"`
	Targets  []Target `json:"targets"`
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
}

// NewRev is a new source revision for all N objects.
type NewRev struct {
	AllReadySeconds    float64 `json:"allReadySeconds"`
	P50Seconds         float64 `json:"p50Seconds"`
	P95Seconds         float64 `json:"p95Seconds"`
	CPU                CPU     `json:"cpuSeconds"`
	RunsStarted        int     `json:"runsStarted"`
	ArtifactDownloads  int     `json:"artifactDownloads"`
	APIWritesPerObject float64 `json:"apiWritesPerObject"`
}

// Idle is a window with nothing changed after convergence.
type Idle struct {
	WindowSeconds   float64        `json:"windowSeconds"`
	RunsStarted     int            `json:"runsStarted"`
	ControllerCPU   float64        `json:"controllerCPUSeconds"`
	ControllerCores float64        `json:"controllerCores"`
	APIWrites       int            `json:"apiWrites"`
	APIWritesByRes  map[string]int `json:"apiWritesByResource"`
}

// Restart is the controller restarted with N converged objects.
type Restart struct {
	WindowSeconds     float64        `json:"windowSeconds"`
	RunsStarted       int            `json:"runsStarted"`
	Budget            int            `json:"budget"`
	CPU               CPU            `json:"cpuSeconds"`
	APIWrites         int            `json:"apiWrites"`
	APIWritesByRes    map[string]int `json:"apiWritesByResource"`
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
func (r *Report) targets() []Target {
	yes := func(b bool) *bool { return &b }
	cores := float64(r.Machine.Cores)
	cpuRatio := ratio(r.Scale.CPUPerObject, r.Overhead.RawCPUPerRun)
	bound := 1.2 * r.Scale.CPU.Total() / cores
	ts := []Target{
		{
			Name: "one object", Want: "≤ 1.5× the raw engine",
			Measured: fmt.Sprintf("%.2f s vs %.2f s: %.2f×", r.Overhead.LandformMedian, r.Overhead.RawMedian, r.Overhead.Ratio),
			Met:      yes(r.Overhead.Ratio <= 1.5),
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
			Note:     "not run at 1000 objects",
		},
		{
			Name: "artifact downloads", Want: "one per digest",
			Measured: fmt.Sprintf("%d for 1 digest (N=%d); %d for the new revision", r.Scale.ArtifactDownloads, r.Scale.N, r.NewRev.ArtifactDownloads),
			Met:      yes(r.Scale.ArtifactDownloads <= 1 && r.NewRev.ArtifactDownloads <= 1),
		},
		{
			Name: "idle", Want: "zero runs between drift intervals",
			Measured: fmt.Sprintf("%d runs in %.0f s", r.Idle.RunsStarted, r.Idle.WindowSeconds),
			Met:      yes(r.Idle.RunsStarted == 0),
		},
		{
			Name: "restart", Want: fmt.Sprintf("no more runs than the budget (--concurrent-runs=%d)", r.Restart.Budget),
			Measured: fmt.Sprintf("%d runs in the first %.0f s", r.Restart.RunsStarted, r.Restart.WindowSeconds),
			Met:      yes(r.Restart.RunsStarted <= r.Restart.Budget),
		},
	}
	if r.Scale.N < 200 {
		ts[1].Met, ts[1].Note = nil, fmt.Sprintf("measured at N=%d, not 200; %s at this N", r.Scale.N, metWord(cpuRatio <= 1.5))
		ts[2].Met, ts[2].Note = nil, fmt.Sprintf("measured at N=%d, not 200; %s at this N", r.Scale.N, metWord(r.Scale.AllReadySeconds <= bound))
	}
	return ts
}

func metWord(b bool) string {
	if b {
		return "met"
	}
	return "not met"
}

// writeJSON writes r as indented JSON.
func (r *Report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeMarkdown renders r as docs/benchmarks.md.
func (r *Report) writeMarkdown(w io.Writer) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# Benchmarks\n\n")
	p("Generated by `make bench` (`hack/bench`) on %s, from %s; the figures are also in [benchmarks.json](benchmarks.json).\n", r.Date, r.Revision)
	p("Run it yourself with `make bench` (`BENCH_N=200 make bench` for the documented scale).\n\n")

	p("## Machine\n\n")
	p("| | |\n|---|---|\n")
	p("| CPU | %d × %s |\n", r.Machine.Cores, r.Machine.CPUModel)
	p("| memory | %.1f GiB |\n", r.Machine.MemoryGiB)
	p("| kernel | %s |\n", r.Machine.Kernel)
	p("| Go | %s |\n", r.Machine.Go)
	p("| engine | %s |\n", r.Machine.Engine)
	p("| load average at start / end | %s / %s |\n", r.Machine.LoadStart, r.Machine.LoadEnd)
	p("| CPU-s used by other processes during the scale phase | %.1f |\n\n", r.Machine.OthersCPUs)
	p("The machine may be shared: the load average and the CPU other processes used during the scale phase (from `/proc/stat`,\n")
	p("less everything measured here and the harness) say how much of it the run had; wall times suffer from it, CPU-seconds hardly.\n\n")

	p("## Method\n\n")
	p("The harness starts its own control plane as the integration tests do: a real kube-apiserver and etcd (envtest, `bin/`),\n")
	p("and an HTTP artifact server that publishes the module as a GitRepository's artifact the way source-controller does\n")
	p("(no source-controller; the GitRepository status is written by the harness). Landform is the real `bin/landform-controller`\n")
	p("as a child process with `--runner=local` (runners are its child processes, running `bin/tofu`), `--concurrent=%d`,\n", r.Config.Concurrent)
	p("`--concurrent-runs=%d`. Every object is auto-approved, writes its outputs to a Secret, and has `interval: %s`.\n", r.Config.ConcurrentRuns, r.Config.Interval)
	p("The module is trivial: one `terraform_data` and two outputs; the state is in Terraform's `kubernetes` backend on the same API server.\n")
	p("Everything is on loopback with `CHECKPOINT_DISABLE=1`.\n\n")
	p("Times are taken from watches (a controller-runtime watch on Terraform objects and on Secrets), never by polling:\n")
	p("an object is done when it is Ready at its generation with no run in flight and its outputs Secret holds both outputs.\n")
	p("A run is counted when a new `status.run.id` appears on an object (the controller records every run there before it starts).\n")
	p("CPU is read from `/proc/<pid>/stat`: the controller's own utime+stime; runners and engine as the controller's reaped children\n")
	p("(cutime+cstime) plus its live descendants; the envtest kube-apiserver and etcd processes. Peak RSS is the controller's VmHWM.\n")
	p("API writes are the API server's `apiserver_request_total` for POST, PUT, PATCH, DELETE and APPLY before and after, from its\n")
	p("`/metrics` endpoint, less the harness's own creates and status updates; they include the API server's own identity Lease\n")
	p("renewals (one every 10 s). Artifact downloads are counted by the artifact server.\n\n")
	p("1. **Overhead**: %d samples, alternating: the raw engine (`tofu init`, `plan -out`, `apply`, `output -json` in a fresh directory\n", r.Config.Samples)
	p("   with the same module and the `kubernetes` backend on the same API server), then one new Landform object created and\n")
	p("   waited for (create → Ready + outputs Secret). Medians and their ratio. The first Landform sample includes the\n")
	p("   controller's first artifact download and client warm-up.\n")
	p("2. **Scale**: N=%d objects created at once on one GitRepository; all-Ready time from the first create, p50/p95 latency.\n", r.Config.N)
	p("3. **New revision**: a new artifact (same module, new revision and digest) for the same GitRepository; time until every object\n")
	p("   has applied it.\n")
	p("4. **Idle**: %.0f s with nothing changed after convergence (no drift interval elapses in it).\n", r.Config.IdleWindowS)
	p("5. **Restart**: the controller is stopped (SIGTERM) and started again on the same work directory with N converged objects;\n")
	p("   runs started in the first %.0f s.\n\n", r.Config.RestartWindowS)

	p("## Targets\n\n")
	p("| target | wanted | measured | met |\n|---|---|---|---|\n")
	for _, t := range r.Targets {
		met := "—"
		if t.Met != nil {
			met = map[bool]string{true: "yes", false: "**no**"}[*t.Met]
		}
		if t.Note != "" {
			met += " (" + t.Note + ")"
		}
		p("| %s | %s | %s | %s |\n", t.Name, t.Want, t.Measured, met)
	}

	o := r.Overhead
	p("\n## Overhead: one object\n\n")
	p("| | median | samples (s) |\n|---|---|---|\n")
	p("| raw engine | %.2f s | %s |\n", o.RawMedian, floats(o.RawSeconds))
	p("| Landform | %.2f s | %s |\n", o.LandformMedian, floats(o.LandformSeconds))
	p("\nRatio **%.2f×**. Raw engine per run: %.3f CPU-s in the engine, %.3f CPU-s machine-wide (engine + API server + etcd), %.0f API writes.\n",
		o.Ratio, o.RawEngineCPUPerRun, o.RawCPUPerRun, o.RawAPIWritesPerRun)
	p("Landform per object, one at a time: %.3f CPU-s machine-wide (controller + runners and engine + API server + etcd).\n", o.LandformCPUPerObj)

	s := r.Scale
	p("\n## Scale: %d objects on one GitRepository\n\n", s.N)
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
	p("| artifact downloads | %d |\n", s.ArtifactDownloads)
	p("| API writes per object | %.1f (%s) |\n", s.APIWritesPerObject, counts(s.APIWritesByRes))

	n := r.NewRev
	p("\n## New revision for all %d objects\n\n", s.N)
	p("| | |\n|---|---|\n")
	p("| all applied | %.1f s |\n", n.AllReadySeconds)
	p("| latency p50 / p95 | %.1f s / %.1f s |\n", n.P50Seconds, n.P95Seconds)
	p("| CPU: controller / runners and engine / API server / etcd | %.1f / %.1f / %.1f / %.1f s |\n", n.CPU.Controller, n.CPU.Runners, n.CPU.APIServer, n.CPU.Etcd)
	p("| runs started | %d |\n", n.RunsStarted)
	p("| artifact downloads | %d |\n", n.ArtifactDownloads)
	p("| API writes per object | %.1f |\n", n.APIWritesPerObject)

	i := r.Idle
	p("\n## Idle\n\n")
	p("%.0f s after convergence with nothing changed: **%d runs** started, controller %.2f CPU-s (%.3f cores), %d API writes (%s).\n",
		i.WindowSeconds, i.RunsStarted, i.ControllerCPU, i.ControllerCores, i.APIWrites, counts(i.APIWritesByRes))

	rs := r.Restart
	p("\n## Restart\n\n")
	p("Controller restarted with %d converged objects: **%d runs** started in the first %.0f s (budget %d);\n", s.N, rs.RunsStarted, rs.WindowSeconds, rs.Budget)
	p("CPU in that window: controller %.2f s, runners and engine %.2f s, API server %.2f s, etcd %.2f s; %d API writes (%s); controller peak RSS %.0f MiB.\n",
		rs.CPU.Controller, rs.CPU.Runners, rs.CPU.APIServer, rs.CPU.Etcd, rs.APIWrites, counts(rs.APIWritesByRes), rs.ControllerPeakMiB)

	p("\n## Not measured yet\n\n")
	p("- 200 and 1000 objects: `BENCH_N=200 make bench` and `BENCH_N=1000 make bench` run them; no figures are published for them yet.\n")
	p("- The overhead of a module using the stand-in cloud's provider (`landform-cloud`).\n")
	p("- Engine processes started per run, and provider init with and without the mirror.\n")
	p("- Runs per drift interval: the idle window is shorter than the objects' interval, so it sees no drift checks.\n")
	_, err := io.WriteString(w, b.String())
	return err
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
