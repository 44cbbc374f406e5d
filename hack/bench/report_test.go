package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/landform-dev/landform/internal/testenv"
)

func TestPercentile(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		p    float64
		want float64
	}{
		{nil, 50, 0},
		{[]float64{3}, 95, 3},
		{[]float64{3, 1, 2}, 50, 2},
		{[]float64{4, 1, 3, 2}, 50, 2.5},
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21}, 95, 20},
		{[]float64{1, 2}, 95, 1.95},
		{[]float64{5, 1, 9}, 100, 9},
		{[]float64{5, 1, 9}, 0, 1},
	} {
		if got := percentile(tc.xs, tc.p); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("percentile(%v, %v) = %v, want %v", tc.xs, tc.p, got, tc.want)
		}
	}
	xs := []float64{3, 1, 2}
	_ = median(xs)
	if diff := cmp.Diff([]float64{3, 1, 2}, xs); diff != "" {
		t.Errorf("percentile reordered its input (-want +got):\n%s", diff)
	}
}

func TestRatio(t *testing.T) {
	if got := ratio(3, 2); got != 1.5 {
		t.Errorf("ratio(3, 2) = %v", got)
	}
	if got := ratio(3, 0); got != 0 {
		t.Errorf("ratio(3, 0) = %v, want 0 (JSON has no Inf)", got)
	}
}

func TestParseProcStat(t *testing.T) {
	line := "4242 (tofu (x) y) S 17 4242 4242 0 -1 4194304 100 0 0 0 250 50 12 8 20 0 9 0 100 0 0\n"
	got, err := parseProcStat(line)
	if err != nil {
		t.Fatal(err)
	}
	want := procStat{pid: 4242, ppid: 17, comm: "tofu (x) y", self: 3, children: 0.2}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(procStat{}), cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := parseProcStat("garbage"); err == nil {
		t.Error("parsed a malformed line")
	}
}

func TestDescendantsCPU(t *testing.T) {
	procs := []procStat{
		{pid: 1, ppid: 0, self: 100},
		{pid: 10, ppid: 1, self: 1, children: 0.5}, // the controller
		{pid: 11, ppid: 10, self: 2, children: 1},  // a runner
		{pid: 12, ppid: 11, self: 4},               // its engine
		{pid: 13, ppid: 1, self: 8},                // someone else
	}
	if got := descendantsCPU(10, procs); got != 7 {
		t.Errorf("descendantsCPU = %v, want 7", got)
	}
}

func TestAPIWrites(t *testing.T) {
	exposition := `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="secrets",scope="resource",subresource="",verb="GET",version="v1"} 40
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="secrets",scope="resource",subresource="",verb="POST",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="secrets",scope="resource",subresource="",verb="PUT",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="infra.landform.dev",resource="terraforms",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="WATCH",version="v1"} 9
apiserver_request_total_other{verb="POST",resource="x"} 1
`
	got := apiWrites(exposition)
	want := map[string]int{"secrets": 5, "terraforms/status": 7}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if d := cmp.Diff(map[string]int{"secrets": 2, "leases": 4}, diff(map[string]int{"secrets": 5, "events": 1}, map[string]int{"secrets": 7, "events": 1, "leases": 4})); d != "" {
		t.Errorf("diff (-want +got):\n%s", d)
	}
}

func TestEngineCounts(t *testing.T) {
	file := filepath.Join(t.TempDir(), "engine-processes")
	if err := os.WriteFile(file, []byte("raw init\nraw plan\nlandform version 1700000000000001\nlandform init 1700000000000002\nlandform init\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &engineCounter{file: file}
	want := map[string]map[string]int{"raw": {"init": 1, "plan": 1}, "landform": {"version": 1, "init": 2}}
	if diff := cmp.Diff(want, e.counts()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := e.starts()[3].at; !got.Equal(time.UnixMicro(1700000000000002)) {
		t.Errorf("the fourth process started at %v, want %v", got, time.UnixMicro(1700000000000002))
	}
	if diff := cmp.Diff(map[string]float64{"init": 1, "plan": 0.5}, perRun(map[string]int{"init": 2, "plan": 1}, 2)); diff != "" {
		t.Errorf("perRun (-want +got):\n%s", diff)
	}
}

func TestSubcommandOrder(t *testing.T) {
	got := subcommandOrder(map[string]bool{"output": true, "apply": true, "zzz": true, "init": true, "aaa": true, "version": true, "show": true, "plan": true})
	want := []string{"version", "init", "plan", "show", "apply", "output", "aaa", "zzz"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestBeyond(t *testing.T) {
	raw := map[string]float64{"init": 1, "plan": 1, "apply": 1, "output": 1}
	lf := map[string]float64{"init": 1, "plan": 1, "show": 1, "apply": 1}
	if got := beyond(raw, lf, "+"); got != "`show` (+1)" {
		t.Errorf("Landform beyond the raw engine: %q", got)
	}
	if got := beyond(lf, raw, "−"); got != "`output` (−1)" {
		t.Errorf("the raw engine beyond Landform: %q", got)
	}
	if got := beyond(raw, raw, "+"); got != "" {
		t.Errorf("the same processes: %q", got)
	}
}

func sample() *Report {
	return sampleAt(20)
}

// sampleAt is a report of a run at n objects: the one-object targets
// not met, the restart over its budget, the rest met.
func sampleAt(n int) *Report {
	r := &Report{
		Date: "2025-01-01T00:00:00Z", Revision: "`abc`",
		Machine:       Machine{CPUModel: "Test CPU", Cores: 2, MemoryGiB: 8},
		Config:        Config{N: n, Samples: 5, Concurrent: 4, ConcurrentRuns: 10, IdleWindowS: 30, RestartWindowS: 60, Interval: "1h0m0s"},
		EngineWrapper: WrapperCost{WallMillis: 1.1, CPUMillis: 0.9, Samples: 21},
		Overhead: Overhead{Module: "one", RawSeconds: []float64{0.2, 0.3}, LandformSeconds: []float64{0.5, 0.7}, RawMedian: 0.25, LandformMedian: 0.6, Ratio: 2.4, RawCPUPerRun: 0.3,
			RawEngineProcs:      map[string]float64{"init": 1, "plan": 1, "apply": 1, "output": 1},
			LandformEngineProcs: map[string]float64{"version": 1, "init": 1, "plan": 1, "show": 1, "apply": 1, "output": 1}},
		OverheadCloud: Overhead{Module: "cloud", RawSeconds: []float64{0.6}, LandformSeconds: []float64{0.8}, RawMedian: 0.6, LandformMedian: 0.8, Ratio: 1.33, CloudResourcesChecked: 10,
			RawEngineProcs:      map[string]float64{"init": 1, "plan": 1, "apply": 1, "output": 1},
			LandformEngineProcs: map[string]float64{"version": 1, "init": 1, "plan": 1, "show": 1, "apply": 1, "output": 1}},
		Init: Init{
			WithMirror:    InitCase{Seconds: []float64{0.05, 0.07}, CPUSeconds: []float64{0.05, 0.06}, Median: 0.06, CPUMedian: 0.055},
			WithoutMirror: InitCase{Seconds: []float64{0.2, 0.22}, CPUSeconds: []float64{0.2, 0.2}, Median: 0.21, CPUMedian: 0.2, ProviderBytes: 18591906},
			Ratio:         3.5,
		},
		Scale: Scale{N: n, AllReadySeconds: 10, CPU: CPU{Controller: 1, Runners: 6, APIServer: 2, Etcd: 1}, CPUPerObject: 0.5, ControllerPeakMiB: 120, RunsStarted: 2 * n,
			ArtifactDownloads: 1, RunsByAction: map[string]int{"plan": n, "apply": n}, APIWritesByRes: map[string]int{"secrets": 3 * n},
			EngineProcs: map[string]int{"version": n, "init": n, "plan": n, "show": n, "apply": n, "output": n / 2}, EngineProcsPerObject: 5.5},
		NewRev:  NewRev{ArtifactDownloads: 1, EngineProcs: map[string]int{"init": n, "plan": n}},
		Idle:    Idle{WindowSeconds: 30},
		Restart: Restart{WindowSeconds: 60, RunsStarted: 12, Budget: 10},
	}
	r.Targets = r.targets()
	return r
}

func metOf(r *Report) map[string]string {
	got := map[string]string{}
	for _, tg := range r.Targets {
		met := "unknown"
		if tg.Met != nil {
			met = metWord(*tg.Met)
		}
		got[tg.Name] = met
	}
	return got
}

// TestOneObjectTarget: one object is held to 1.25× the raw engine.
func TestOneObjectTarget(t *testing.T) {
	r := sample()
	for ratio, want := range map[float64]string{1.25: "met", 1.3: "not met"} {
		r.Overhead.Ratio = ratio
		r.Targets = r.targets()
		if got := metOf(r)["one object"]; got != want {
			t.Errorf("%.2f×: %s, want %s", ratio, got, want)
		}
	}
	if got := r.targets()[0].Want; got != "≤ 1.25× the raw engine" {
		t.Errorf("want %q", got)
	}
}

func TestTargets(t *testing.T) {
	want := map[string]string{
		"one object":                        "not met", // 2.4× > 1.25×
		"one object, cloud provider module": "met",     // 1.33×
		"machine-wide CPU per object":       "unknown", // N=20, not 200
		"all Ready":                         "unknown",
		"controller peak RSS":               "unknown", // N=20, not 1000
		"artifact downloads":                "met",
		"idle":                              "met",
		"restart":                           "not met", // 12 > 10
	}
	if diff := cmp.Diff(want, metOf(sample())); diff != "" {
		t.Errorf("N=20 (-want +got):\n%s", diff)
	}
	// At 200 the CPU targets count: 0.5 / 0.3 CPU-s is 1.67× > 1.5×, and
	// 10 s is over 1.2 × 10 CPU-s / 2 cores = 6 s.
	want["machine-wide CPU per object"], want["all Ready"] = "not met", "not met"
	if diff := cmp.Diff(want, metOf(sampleAt(200))); diff != "" {
		t.Errorf("N=200 (-want +got):\n%s", diff)
	}
	want["machine-wide CPU per object"], want["all Ready"], want["controller peak RSS"] = "unknown", "unknown", "met"
	r := sampleAt(1000)
	if diff := cmp.Diff(want, metOf(r)); diff != "" {
		t.Errorf("N=1000 (-want +got):\n%s", diff)
	}
	if got := r.Targets[2].Note; got != "measured at N=1000, not 200; not met at this N" {
		t.Errorf("note = %q", got)
	}
	r.Scale.ControllerPeakMiB = 301
	if got := metOf(&Report{Scale: r.Scale, Targets: r.targets()})["controller peak RSS"]; got != "not met" {
		t.Errorf("301 MiB at 1000 objects: %s", got)
	}
}

func TestApplyNotes(t *testing.T) {
	r := sample()
	r.applyNotes(map[string]string{
		"one object":         "  the runner's start dominates a trivial module  ",
		"artifact downloads": "met, so never shown",
		"restart":            "",
	})
	why := map[string]string{}
	for _, tg := range r.Targets {
		if tg.Why != "" {
			why[tg.Name] = tg.Why
		}
	}
	if diff := cmp.Diff(map[string]string{"one object": "the runner's start dominates a trivial module"}, why); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	var md bytes.Buffer
	if err := r.writeMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	testenv.WantIn(t, "markdown", md.String(),
		"Not met:\n\n- **one object**: the runner's start dominates a trivial module\n",
		"- **restart**: no explanation recorded yet (hack/bench/notes.json).\n",
	)
	if strings.Contains(md.String(), "never shown") {
		t.Error("a met target's note was rendered")
	}
}

func TestRender(t *testing.T) {
	r := sample()
	var js bytes.Buffer
	if err := writeJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, &back); diff != "" {
		t.Errorf("JSON round trip (-want +got):\n%s", diff)
	}
	var md bytes.Buffer
	if err := r.writeMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	testenv.WantIn(t, "markdown", md.String(),
		"# Benchmarks", "2 × Test CPU", "| one object | ≤ 1.25× the raw engine | 0.60 s vs 0.25 s: 2.40× | **no** |",
		"| one object, cloud provider module | ≤ 1.5× the raw engine | 0.80 s vs 0.60 s: 1.33× | yes |",
		"| trivial | 0.25 s | 0.60 s | **2.40×** | 0.20, 0.30 | 0.50, 0.70 |",
		"| cloud provider | 0.60 s | 0.80 s | **1.33×** | 0.60 | 0.80 |",
		"each of the 10 samples of the cloud module (raw and Landform) created its security group exactly once",
		"| `version` | – | 1 | – | 1 | 1 |", "| `output` | 1 | 1 | 1 | 1 | 0.5 |", "| all | **4** | **6** | **4** | **6** | **5.5** |",
		"1.1 ms wall and 0.9 ms CPU (median of 21 runs",
		"Beyond the raw engine's processes, Landform runs `version` (+1), `show` (+1) per object (trivial module).",
		"| network mirror on loopback: downloaded and unpacked | 0.21 s | 0.20 s | 17.7 MiB | 0.20, 0.22 |",
		"| read-only filesystem mirror, used in place (Landform) | 0.06 s | 0.06 s | 0 bytes |",
		"init takes **3.50×** as long",
		"| runs started | 40 (apply 20, plan 20) |", "**12 runs** started in the first 60 s (budget 10)",
		"measured at N=20, not 200", "None kept yet", "- The scale runs not listed above",
	)
}

// TestRenderScaleRuns renders the docs from files as `make bench` leaves
// them: the default run and scale runs beside it, found by name and
// ordered by N (not by name: "1000" sorts before "200").
func TestRenderScaleRuns(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "benchmarks.json")
	if got := scaleRunPath(main, 200); got != filepath.Join(dir, "benchmarks-200.json") {
		t.Errorf("scaleRunPath = %s", got)
	}
	for path, r := range map[string]*Report{main: sample(), scaleRunPath(main, 1000): sampleAt(1000), scaleRunPath(main, 200): sampleAt(200)} {
		if err := writeReportFile(path, r); err != nil {
			t.Fatal(err)
		}
	}
	// Not a scale run: ignored.
	if err := os.WriteFile(filepath.Join(dir, "benchmarks-old.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	notes := filepath.Join(dir, "notes.json")
	if err := os.WriteFile(notes, []byte(`{"machine-wide CPU per object": "etcd's writes per object dominate"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	md := filepath.Join(dir, "benchmarks.md")
	if err := render(main, md, notes, true); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	i200, i1000 := strings.Index(out, "### 200 objects"), strings.Index(out, "### 1000 objects")
	if i200 < 0 || i1000 < i200 {
		t.Fatalf("scale runs missing or out of order (200 at %d, 1000 at %d):\n%s", i200, i1000, out)
	}
	testenv.WantIn(t, "markdown", out,
		"([benchmarks-200.json](benchmarks-200.json))",
		"| machine-wide CPU per object | ≤ 1.5× the raw engine's (engine + API server + etcd), at 200 objects | 0.500 CPU-s vs 0.300 CPU-s: 1.67× (N=200) | **no** |",
		"- **machine-wide CPU per object**: etcd's writes per object dominate\n",
		"| controller peak RSS | ≤ 300 MiB at 1000 objects | 120 MiB (N=1000) | yes |",
		"#### New revision for all 1000 objects",
	)
	for _, gone := range []string{"None kept yet", "The scale runs not listed above"} {
		if strings.Contains(out, gone) {
			t.Errorf("markdown still says %q with both scale runs kept", gone)
		}
	}
	// The notes were written back into the run they apply to.
	r200, err := readReport(scaleRunPath(main, 200))
	if err != nil {
		t.Fatal(err)
	}
	if got := r200.Targets[2].Why; got != "etcd's writes per object dominate" {
		t.Errorf("benchmarks-200.json's why = %q", got)
	}
}

func TestDriftTarget(t *testing.T) {
	met := func(d Drift) *bool {
		r := &Report{Drift: d}
		for _, tg := range r.targets() {
			if tg.Name == "drift checks" {
				return tg.Met
			}
		}
		return nil
	}
	if got := met(Drift{}); got != nil {
		t.Errorf("a skipped drift phase has a target (met %v)", *got)
	}
	once := Drift{Objects: 20, IntervalSeconds: 20, Runs: 60, DriftRuns: 60, MinGapSeconds: 19.3, MedianGapSeconds: 21}
	for _, tc := range []struct {
		name string
		d    Drift
		want bool
	}{
		{"once per interval", once, true},
		{"a check between intervals", Drift{Objects: 20, IntervalSeconds: 20, Runs: 61, DriftRuns: 61, MinGapSeconds: 3, MedianGapSeconds: 21}, false},
		{"a run that is not a drift check", Drift{Objects: 20, IntervalSeconds: 20, Runs: 60, DriftRuns: 59, MinGapSeconds: 19.3, MedianGapSeconds: 21}, false},
	} {
		if got := met(tc.d); got == nil || *got != tc.want {
			t.Errorf("%s: met %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMetricSamples(t *testing.T) {
	exposition := `landform_runner_start_seconds_bucket{placement="local",le="0.1"} 3
landform_runner_start_seconds_sum{placement="local"} 0.057
landform_runner_start_seconds_sum{placement="pod"} 12
landform_runner_start_seconds_count{placement="local"} 3
`
	got, err := metricSamples(exposition, "landform_runner_start_seconds_sum")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].labels["placement"] != "local" || got[0].value != 0.057 || got[1].value != 12 {
		t.Errorf("samples = %+v", got)
	}
	if _, err := metricSamples(exposition+`landform_runner_start_seconds_sum{placement="x"} NaNa`+"\n", "landform_runner_start_seconds_sum"); err == nil {
		t.Error("a value that does not parse was not reported")
	}
	// A series without labels; a metric whose name only starts with it is
	// another.
	kept := "# TYPE landform_runner_pods_kept gauge\nlandform_runner_pods_kept 2\nlandform_runner_pods_kept_other 5\n"
	got, err = metricSamples(kept, "landform_runner_pods_kept")
	if err != nil || len(got) != 1 || got[0].value != 2 || len(got[0].labels) != 0 {
		t.Errorf("samples = %+v, %v", got, err)
	}
}
