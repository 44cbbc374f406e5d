package main

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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

func sample() *Report {
	r := &Report{
		Date: "2025-01-01T00:00:00Z", Revision: "`abc`",
		Machine:  Machine{CPUModel: "Test CPU", Cores: 2, MemoryGiB: 8},
		Config:   Config{N: 20, Samples: 5, Concurrent: 4, ConcurrentRuns: 10, IdleWindowS: 30, RestartWindowS: 60, Interval: "1h0m0s"},
		Overhead: Overhead{RawSeconds: []float64{0.2, 0.3}, LandformSeconds: []float64{0.5, 0.7}, RawMedian: 0.25, LandformMedian: 0.6, Ratio: 2.4, RawCPUPerRun: 0.3},
		Scale: Scale{N: 20, AllReadySeconds: 10, CPU: CPU{Controller: 1, Runners: 6, APIServer: 2, Etcd: 1}, CPUPerObject: 0.5,
			ArtifactDownloads: 1, RunsByAction: map[string]int{"plan": 20, "apply": 20}, APIWritesByRes: map[string]int{"secrets": 60}},
		NewRev:  NewRev{ArtifactDownloads: 1},
		Idle:    Idle{WindowSeconds: 30},
		Restart: Restart{WindowSeconds: 60, RunsStarted: 12, Budget: 10},
	}
	r.Targets = r.targets()
	return r
}

func TestTargets(t *testing.T) {
	got := map[string]string{}
	for _, tg := range sample().Targets {
		met := "unknown"
		if tg.Met != nil {
			met = metWord(*tg.Met)
		}
		got[tg.Name] = met
	}
	want := map[string]string{
		"one object":                  "not met", // 2.4× > 1.5×
		"machine-wide CPU per object": "unknown", // N=20, not 200
		"all Ready":                   "unknown",
		"controller peak RSS":         "unknown",
		"artifact downloads":          "met",
		"idle":                        "met",
		"restart":                     "not met", // 12 > 10
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestRender(t *testing.T) {
	r := sample()
	var js bytes.Buffer
	if err := r.writeJSON(&js); err != nil {
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
	for _, want := range []string{
		"# Benchmarks", "2 × Test CPU", "| one object | ≤ 1.5× the raw engine | 0.60 s vs 0.25 s: 2.40× | **no** |",
		"| raw engine | 0.25 s | 0.20, 0.30 |", "| runs started | 0 (apply 20, plan 20) |", "**12 runs** started in the first 60 s (budget 10)",
		"measured at N=20, not 200",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}
