package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAuditedWrites: a raw engine's Pod and a Landform object, their
// writes told apart by name and time, each writer counted, the node's
// writes and Landform's leader election left out; the writes of the raw
// engine's Pod keeping its state are neither side's.
func TestAuditedWrites(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	const (
		ns      = "bench-cluster"
		kubelet = "kubelet/v1.36.4 (linux/amd64) kubernetes/abc"
		sched   = "kube-scheduler/v1.36.4 (linux/amd64) kubernetes/abc/scheduler"
	)
	n := 0
	line := func(verb, ua, resource, sub, namespace, name string, at int) string {
		n++
		return auditLine(fmt.Sprint(n), "ResponseComplete", verb, ua, resource, sub, namespace, name, 201, "", ms(at))
	}
	lines := []string{
		// The raw engine's Pod.
		line("create", uaBench, "pods", "", ns, "raw-x-0", 0),
		line("create", sched, "pods", "binding", ns, "raw-x-0", 10),
		line("patch", kubelet, "pods", "status", ns, "raw-x-0", 20),
		line("create", kubelet, "events", "", ns, "raw-x-0.18a2b3c4d5e6f7a8", 30),
		line("get", kubelet, "pods", "", ns, "raw-x-0", 31),
		line("patch", kubelet, "pods", "status", ns, "raw-x-0", 900),
		line("delete", uaBench, "pods", "", ns, "raw-x-0", 950),
		// The raw engine's Pod keeping its state: neither side's.
		line("create", uaBench, "pods", "", ns, "rawstate-x-0", 1100),
		line("create", kubelet, "serviceaccounts", "token", ns, "bench-raw-engine", 1110),
		line("update", uaTofu, "secrets", "", ns, "tfstate-default-rawstate-x-0", 1200),
		line("delete", uaBench, "pods", "", ns, "rawstate-x-0", 1300),
		// The node's Lease: not counted.
		line("update", kubelet, "leases", "", "kube-node-lease", "node", 1000),
		// The Landform object.
		line("create", uaBench, "terraforms", "", ns, "one-x-0", 2000),
		line("patch", uaCtrl, "terraforms", "status", ns, "one-x-0", 2010),
		line("create", uaCtrl, "secrets", "", ns, "tfstate-default-one-x-0", 2020),
		line("create", uaCtrl, "pods", "", ns, "one-x-0-runner-abcde", 2030),
		// Reads: the controller's and the engine's, and a watch (neither).
		line("get", uaCtrl, "secrets", "", ns, "one-x-0-outputs", 2031),
		line("watch", uaCtrl, "pods", "", ns, "one-x-0-runner-abcde", 2032),
		line("get", uaTofu, "secrets", "", ns, "tfstate-default-one-x-0", 2290),
		// The runner Pod's token names the ServiceAccount: charged by time.
		line("create", kubelet, "serviceaccounts", "token", ns, "landform-runner", 2040),
		line("update", uaTofu, "secrets", "", ns, "tfstate-default-one-x-0", 2300),
		line("create", kubelet, "events", "", ns, "one-x-0-runner-abcde.18a2b3c4d5e6f7a9", 2400),
		// Leader election: Landform's, not charged.
		line("update", uaCtrl, "leases", "", "landform-system", "landform-leader", 2500),
		line("delete", uaCtrl, "pods", "", ns, "one-x-0-runner-abcde", 2600),
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The harness's own clock is a little early: the log's creates start
	// the samples.
	samples := []auditedSample{
		{writeSample{name: "one-x-0", created: ms(1990), done: ms(2700)}, sampleLandform},
		{writeSample{name: "raw-x-0", created: ms(-5), done: ms(960)}, sampleRaw},
		{writeSample{name: "rawstate-x-0", created: ms(1095), done: ms(1350)}, sampleRawState},
	}
	raw, lf, err := auditedWrites(path, ns, samples, ms(3000))
	if err != nil {
		t.Fatal(err)
	}
	wantWriters(t, "raw", raw.ByWriter, map[string]float64{"bench harness": 2, "kube-scheduler": 1, "kubelet": 3})
	wantWriters(t, "Landform", lf.ByWriter, map[string]float64{"bench harness": 1, "landform-controller": 4, "tofu": 1, "kubelet": 2})
	if lf.LeaderElection != 1 || lf.NotCounted["kubelet update leases"] != 1 {
		t.Errorf("leader election %d, not counted %v: want 1 and the node's Lease", lf.LeaderElection, lf.NotCounted)
	}
	wantWriters(t, "raw reads", raw.ReadsByReader, map[string]float64{"kubelet": 1})
	wantWriters(t, "Landform reads", lf.ReadsByReader, map[string]float64{"landform-controller": 1, "tofu": 1})
	if lf.ReadsPerObject != 2 {
		t.Errorf("Landform's reads per object %v, want 2 (a watch is no read)", lf.ReadsPerObject)
	}
	if len(lf.FirstSample) != 8 || lf.FirstSample[0].Millis != 0 || lf.FirstSample[4].Name != "landform-runner" {
		t.Errorf("first Landform sample %+v: want its 8 writes from its create, the token among them", lf.FirstSample)
	}

	var sb strings.Builder
	writeAuditedWrites(func(format string, a ...any) { fmt.Fprintf(&sb, format, a...) }, raw, lf)
	md := sb.String()
	for _, want := range []string{
		"| landform-controller | – | 4 |",
		"| **Landform's own** (controller, runner, engine) | – | **5** |",
		"| **Kubernetes'** (all but Landform and the harness) | **4** | **2** |",
		"| all but the harness | 4 | 7 |",
		"| 5 | 40 | create | `serviceaccounts/token` | `landform-runner` | kubelet |",
		"| tofu | – | 1 |\n| kubelet | 1 | – |\n| **Landform's own** (controller, runner, engine) | – | **2** |\n| all | 1 | 2 |",
		"`LANDFORM_CLUSTER_AUDIT=all make cluster-up`, whose API server logs every request",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}

	if _, _, err := auditedWrites(path, ns, append(samples, auditedSample{writeSample{name: "one-x-1", created: ms(2800)}, sampleLandform}), ms(3000)); err == nil {
		t.Error("a sample the log does not have was measured")
	}
}

func wantWriters(t *testing.T, side string, got, want map[string]float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s writers %v, want %v", side, got, want)
		return
	}
	for w, n := range want {
		if got[w] != n {
			t.Errorf("%s writers %v, want %v", side, got, want)
			return
		}
	}
}

// TestCarryAuditedWrites: a run on a cluster without the audit log keeps
// the writers measured apart; one that measured them keeps its own.
func TestCarryAuditedWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "benchmarks-cluster.json")
	kept := ClusterReport{Revision: "`old`"}
	kept.One.LandformWrites = &OneObjectWrites{Revision: "`old`", ByWriter: map[string]float64{"landform-controller": 19}}
	kept.One.RawWrites = &OneObjectWrites{Revision: "`old`", ByWriter: map[string]float64{"kubelet": 11}}
	if err := writeReportFile(path, &kept); err != nil {
		t.Fatal(err)
	}
	var plain ClusterReport
	carryAuditedWrites(&plain, path)
	if plain.One.LandformWrites == nil || plain.One.LandformWrites.Revision != "`old`" || plain.One.RawWrites.ByWriter["kubelet"] != 11 {
		t.Errorf("not carried: %+v, %+v", plain.One.LandformWrites, plain.One.RawWrites)
	}
	audited := ClusterReport{}
	audited.One.LandformWrites = &OneObjectWrites{Revision: "`new`"}
	carryAuditedWrites(&audited, path)
	if audited.One.LandformWrites.Revision != "`new`" {
		t.Errorf("a run's own writers replaced by the kept run's: %+v", audited.One.LandformWrites)
	}
}
