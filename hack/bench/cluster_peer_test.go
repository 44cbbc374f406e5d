package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/landform-dev/landform/internal/testenv"
)

// TestPeerObjectSettles: a peer's object counts as settled at a revision
// only when Ready at its generation with that revision applied, and done
// only once its outputs Secret holds both outputs, as Landform's.
func TestPeerObjectSettles(t *testing.T) {
	const rev = "main@sha1:abc"
	obj := func(generation, observed int64, ready, revision string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"namespace": "ns", "name": "a", "generation": generation},
			"status": map[string]any{
				"observedGeneration":  observed,
				"lastAppliedRevision": revision,
				"conditions":          []any{map[string]any{"type": "Ready", "status": ready}},
			},
		}}
		u.SetGroupVersionKind(tofuControllerGVK)
		return u
	}
	for _, tc := range []struct {
		name string
		u    *unstructured.Unstructured
		want bool
	}{
		{"ready", obj(2, 2, "True", rev), true},
		{"not ready", obj(2, 2, "Unknown", rev), false},
		{"an older generation's status", obj(3, 2, "True", rev), false},
		{"nothing applied", obj(2, 2, "True", ""), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker()
			tr.peerObject(tc.u)
			tr.outputs["ns/a-outputs"] = time.Now()
			if _, done := tr.done("ns/a", rev); done != tc.want {
				t.Errorf("done = %v, want %v", done, tc.want)
			}
		})
	}
	tr := newTracker()
	tr.peerObject(obj(2, 2, "True", rev))
	if _, done := tr.done("ns/a", rev); done {
		t.Error("done without its outputs Secret")
	}
}

func comparisonSample() *ClusterComparison {
	c := &ClusterComparison{Date: "2026-11-28T10:00:00Z", Revision: "`abc`", N: 200,
		Landform: ClusterSetup{ControllerArgs: []string{"--concurrent-runs=10"}},
		Peer: PeerSetup{Name: "tofu-controller", Source: "tofu-controller v0.16.5 (/src)", ControllerArgs: []string{"--concurrent=24"},
			Namespace: "bench-peer"},
		LandformScale: ClusterScale{N: 200, AllReadySeconds: 100, CPUPerObject: 1.2, APIWritesPerObject: 40,
			APIWritesByRes: map[string]int{"secrets": 1800}, CPU: ClusterCPU{Controller: 20, Pods: 150}},
		PeerScale: ClusterScale{N: 200, AllReadySeconds: 250, CPUPerObject: 3, APIWritesPerObject: 50,
			APIWritesByRes: map[string]int{"secrets": 2000}, CPU: ClusterCPU{Controller: 100, Pods: 400}},
	}
	c.Targets = c.targets()
	return c
}

// TestComparisonTarget: 0.65× tofu-controller's time is met, more is not,
// and a note explains a target not met.
func TestComparisonTarget(t *testing.T) {
	c := comparisonSample()
	if got := c.Targets[0]; !*got.Met || got.Want != "all Ready in ≤ 0.65× tofu-controller's time" ||
		got.Measured != "100.0 s vs 250.0 s: 0.40×; CPU per object 1.20 s vs 3.00 s: 0.40×" {
		t.Errorf("100 s against 250 s: %+v", got)
	}
	c.LandformScale.AllReadySeconds = 162.5
	c.Targets = c.targets()
	if got := c.Targets[0]; !*got.Met {
		t.Errorf("162.5 s against 250 s (0.65×): %+v", got)
	}
	c.LandformScale.AllReadySeconds = 170
	c.Targets = c.targets()
	name := "200 " + tofuControllerTarget
	c.applyNotes(map[string]string{name: "why"})
	if got := c.Targets[0]; got.Name != name || *got.Met || got.Why != "why" {
		t.Errorf("170 s against 250 s: %+v", got)
	}
}

// TestRenderComparison: the comparison is rendered under the cluster
// section, and only with a cluster run.
func TestRenderComparison(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "benchmarks.json")
	if got := comparisonPath(main, "tofu-controller"); got != filepath.Join(dir, "benchmarks-cluster-tofu-controller.json") {
		t.Errorf("comparisonPath = %s", got)
	}
	if err := writeReportFile(main, sample()); err != nil {
		t.Fatal(err)
	}
	c := comparisonSample()
	if err := writeReportFile(comparisonPath(main, "tofu-controller"), c); err != nil {
		t.Fatal(err)
	}
	back, err := readComparison(main, "tofu-controller")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c, back); diff != "" {
		t.Errorf("JSON round trip (-want +got):\n%s", diff)
	}
	md := filepath.Join(dir, "benchmarks.md")
	read := func() string {
		t.Helper()
		if err := render(main, md, "", false); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(md)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if out := read(); strings.Contains(out, "Beside tofu-controller") {
		t.Errorf("rendered without the cluster run it is a part of:\n%s", out)
	}
	if err := writeReportFile(clusterReportPath(main), clusterSample()); err != nil {
		t.Fatal(err)
	}
	out := read()
	i := strings.Index(out, "\n### Beside tofu-controller")
	if i < 0 || i < strings.Index(out, "\n## Runner Pods on a real cluster") {
		t.Fatalf("no comparison under the cluster section:\n%s", out)
	}
	testenv.WantIn(t, "the comparison", out[i:],
		"(Landform with `--concurrent-runs=10`, tofu-controller with `--concurrent=24`)",
		"built from tofu-controller v0.16.5 (/src)",
		"| all Ready | 100.0 s | 250.0 s |",
		"| CPU per object | 1.20 s | 3.00 s |",
		"| API writes per object | 40.0 | 50.0 |",
		"API writes by resource: Landform secrets 1800; tofu-controller secrets 2000.",
		"**Target** (200 objects at once beside tofu-controller): all Ready in ≤ 0.65× tofu-controller's time. Measured: 100.0 s vs 250.0 s: 0.40×",
	)
}
