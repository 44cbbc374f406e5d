package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/landform-dev/landform/internal/testenv"
)

var approx = cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })

func TestCgroupUsage(t *testing.T) {
	dir := t.TempDir()
	v1, v2 := filepath.Join(dir, "v1"), filepath.Join(dir, "v2")
	testenv.WriteFile(t, filepath.Join(v1, "cpuacct.usage"), "34222903924\n")
	testenv.WriteFile(t, filepath.Join(v2, "cpu.stat"), "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n")
	for dir, want := range map[string]float64{v1: 34.222903924, v2: 1.5} {
		got, err := cgroupUsage(dir)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("cgroupUsage(%s) = %v, want %v", dir, got, want)
		}
	}
	if _, err := cgroupUsage(filepath.Join(dir, "none")); err == nil {
		t.Error("a directory without CPU accounting was read")
	}
	if _, err := parseCPUStat("user_usec 3\n"); err == nil {
		t.Error("a cpu.stat without usage_usec was read")
	}
}

func TestContainerCgroup(t *testing.T) {
	root := t.TempDir()
	burstable := filepath.Join(root, "cpuacct", "kubepods", "burstable", "pod9aac", "ffd5")
	guaranteed := filepath.Join(root, "cpuacct", "kubepods", "podabcd", "1234")
	besteffort := filepath.Join(root, "cpuacct", "kubepods", "besteffort")
	for _, d := range []string{burstable, guaranteed} {
		testenv.WriteFile(t, filepath.Join(d, "cpuacct.usage"), "1\n")
	}
	testenv.WriteFile(t, filepath.Join(besteffort, "cpuacct.usage"), "2\n")
	for _, tc := range []struct{ uid, id, want string }{
		{"9aac", "containerd://ffd5", burstable},
		{"abcd", "containerd://1234", guaranteed},
	} {
		got, err := containerCgroup(root, tc.uid, tc.id)
		if err != nil || got != tc.want {
			t.Errorf("containerCgroup(%s, %s) = %q, %v; want %q", tc.uid, tc.id, got, err, tc.want)
		}
	}
	if _, err := containerCgroup(root, "9aac", "ffd5"); err == nil {
		t.Error("a container ID without its runtime was accepted")
	}
	if _, err := containerCgroup(root, "9aac", "containerd://other"); err == nil {
		t.Error("another container's cgroup was found")
	}
	if got, err := bestEffortCgroup(root); err != nil || got != besteffort {
		t.Errorf("bestEffortCgroup = %q, %v", got, err)
	}
	// cgroup v2 with the cgroupfs driver.
	v2 := t.TempDir()
	testenv.WriteFile(t, filepath.Join(v2, "kubepods", "besteffort", "cpu.stat"), "usage_usec 7\n")
	if got, err := bestEffortCgroup(v2); err != nil || got != filepath.Join(v2, "kubepods", "besteffort") {
		t.Errorf("bestEffortCgroup (v2) = %q, %v", got, err)
	}
}

func TestPidOf(t *testing.T) {
	pids := t.TempDir()
	// This test's own process: its command line names hack/bench's test
	// binary, bench.test.
	testenv.WriteFile(t, filepath.Join(pids, "bench.pid"), fmt.Sprintf("%d\n", os.Getpid()))
	testenv.WriteFile(t, filepath.Join(pids, "kubelet.pid"), fmt.Sprintf("%d\n", os.Getpid()))
	if got, err := pidOf(pids, "bench"); err != nil || got != os.Getpid() {
		t.Errorf("pidOf(bench) = %d, %v", got, err)
	}
	if _, err := pidOf(pids, "kubelet"); err == nil {
		t.Error("a PID running another program was taken for the kubelet")
	}
	if _, err := pidOf(pids, "etcd"); err == nil {
		t.Error("a component without a PID file was found")
	}
}

func TestClusterCPU(t *testing.T) {
	before := ClusterCPU{Controller: 1, Pods: 10, Kubelet: 5, Containerd: 3, APIServer: 20, Etcd: 7, Scheduler: 1, ControllerManager: 2, Shims: 30}
	after := ClusterCPU{Controller: 1.5, Pods: 10.3, Kubelet: 5.1, Containerd: 3.1, APIServer: 20.4, Etcd: 7.1, Scheduler: 1, ControllerManager: 2.05, Shims: 30.4}
	// The shims reaped the Pods' 0.3: 0.1 is theirs and runc's.
	w := clusterSnap{at: time.Unix(12, 0), cpu: after, writes: map[string]int{"pods": 3}}.sub(clusterSnap{at: time.Unix(10, 0), cpu: before, writes: map[string]int{}})
	want := ClusterCPU{Controller: 0.5, Pods: 0.3, Kubelet: 0.1, Containerd: 0.1, APIServer: 0.4, Etcd: 0.1, ControllerManager: 0.05, Shims: 0.1}
	if diff := cmp.Diff(want, w.cpu, approx); diff != "" {
		t.Errorf("window (-want +got):\n%s", diff)
	}
	if w.seconds != 2 || w.writes["pods"] != 3 {
		t.Errorf("window: %v s, writes %v", w.seconds, w.writes)
	}
	if got := w.cpu.Total(); math.Abs(got-1.65) > 1e-9 {
		t.Errorf("Total = %v", got)
	}
	if got := w.cpu.Node(); math.Abs(got-0.3) > 1e-9 {
		t.Errorf("Node = %v", got)
	}
	// A shim sampled before it reaped its container: never negative.
	w = clusterSnap{cpu: ClusterCPU{Pods: 1}}.sub(clusterSnap{})
	if w.cpu.Shims != 0 {
		t.Errorf("shims = %v, want 0", w.cpu.Shims)
	}
	got := medianCPU([]ClusterCPU{{Controller: 3, Etcd: 1}, {Controller: 1, Etcd: 9}, {Controller: 2, Etcd: 2}})
	if diff := cmp.Diff(ClusterCPU{Controller: 2, Etcd: 2}, got, approx); diff != "" {
		t.Errorf("medianCPU (-want +got):\n%s", diff)
	}
}

func TestControllerFlags(t *testing.T) {
	got := controllerFlags([]string{"--metrics-addr=:8080", "--enable-leader-election", "--runner=pod", "positional", "--runner-image=localhost/r:e2e"})
	want := map[string]string{"metrics-addr": ":8080", "enable-leader-election": "true", "runner": "pod", "runner-image": "localhost/r:e2e"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestReadEnvFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "platform.env")
	testenv.WriteFile(t, path, "LANDFORM_CLUSTER_GIT_URL=http://192.0.2.2:9080\n# a comment=x\n\nLANDFORM_CLUSTER_GIT_ROOT=/var/lib/x/git\n")
	got, err := readEnvFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"LANDFORM_CLUSTER_GIT_URL": "http://192.0.2.2:9080", "LANDFORM_CLUSTER_GIT_ROOT": "/var/lib/x/git"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestPhaseSeconds(t *testing.T) {
	defs := []phaseDef{{key: "a"}, {key: "b"}, {key: "c"}, {key: "d"}}
	t0 := time.Unix(100, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	for _, tc := range []struct {
		name        string
		at          map[string]time.Time
		want        []float64
		wantMissing []bool
	}{
		{"in order", map[string]time.Time{"a": ms(100), "b": ms(250), "c": ms(300), "d": ms(1000)},
			[]float64{0.1, 0.15, 0.05, 0.7}, []bool{false, false, false, false}},
		// b not seen: its time is in c's phase.
		{"a milestone not seen", map[string]time.Time{"a": ms(100), "c": ms(300), "d": ms(1000)},
			[]float64{0.1, 0, 0.2, 0.7}, []bool{false, true, false, false}},
		// c seen before b (two sources): 0, and d counts from b.
		{"out of order", map[string]time.Time{"a": ms(100), "b": ms(400), "c": ms(300), "d": ms(1000)},
			[]float64{0.1, 0.3, 0, 0.6}, []bool{false, false, false, false}},
	} {
		got, missing := phaseSeconds(defs, sampleTimes{start: t0, at: tc.at})
		if diff := cmp.Diff(tc.want, got, approx); diff != "" {
			t.Errorf("%s: seconds (-want +got):\n%s", tc.name, diff)
		}
		if diff := cmp.Diff(tc.wantMissing, missing); diff != "" {
			t.Errorf("%s: missing (-want +got):\n%s", tc.name, diff)
		}
		var sum float64
		for _, s := range got {
			sum += s
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Errorf("%s: the phases add up to %v, not the whole 1 s", tc.name, sum)
		}
	}
	stats := phaseStats([]phaseDef{{"a", "A", "until a"}, {"b", "B", "until b"}}, []sampleTimes{
		{start: t0, at: map[string]time.Time{"a": ms(100), "b": ms(300)}},
		{start: t0, at: map[string]time.Time{"a": ms(300), "b": ms(400)}},
		{start: t0, at: map[string]time.Time{"b": ms(500)}},
	})
	want := []Phase{
		{Name: "A", Until: "until a", Seconds: []float64{0.1, 0.3, 0}, Median: 0.1, Missing: 1},
		{Name: "B", Until: "until b", Seconds: []float64{0.2, 0.1, 0.5}, Median: 0.2},
	}
	if diff := cmp.Diff(want, stats, approx); diff != "" {
		t.Errorf("phaseStats (-want +got):\n%s", diff)
	}
}

func TestRunLogTimes(t *testing.T) {
	log := `{"level":"info","ts":"2026-11-25T15:09:44.970Z","msg":"reconcile did not finish","name":"t1"}
{"level":"debug","ts":"2026-11-25T15:09:45.700Z","logger":"runs","msg":"other object","terraform":"bench-cluster/t2","run":"run-1"}
{"level":"debug","ts":"2026-11-25T15:09:45.752Z","logger":"runs","msg":"{\"terraform_version\":\"1.12.6\"}","terraform":"bench-cluster/t1","run":"run-1"}
not json
{"level":"debug","ts":"2026-11-25T15:09:45.799Z","logger":"runs","msg":"Initializing the backend...","terraform":"bench-cluster/t1","run":"run-1"}
{"level":"debug","ts":1795878585.843,"logger":"runs","msg":"OpenTofu has been successfully initialized!","terraform":"bench-cluster/t1","run":"run-1"}
{"level":"debug","ts":"2026-11-25T15:09:46.000Z","logger":"runs","msg":"Terraform has been successfully initialized!","terraform":"bench-cluster/t1","run":"run-2"}
`
	first, init := runLogTimes(log, "bench-cluster/t1", "run-1")
	if want := time.Date(2026, 11, 25, 15, 9, 45, 752e6, time.UTC); !first.Equal(want) {
		t.Errorf("first = %v, want %v", first, want)
	}
	if want := time.Unix(1795878585, 843e6); init.Sub(want).Abs() > time.Millisecond {
		t.Errorf("init done = %v, want %v", init, want)
	}
	if first, init := runLogTimes(log, "bench-cluster/t1", "run-3"); !first.IsZero() || !init.IsZero() {
		t.Errorf("an unknown run: %v, %v", first, init)
	}
}

func TestStartedVersion(t *testing.T) {
	log := `{"level":"info","ts":"2026-11-25T15:01:58.165Z","logger":"setup","msg":"starting landform-controller","version":"226a144-dirty","runner":"pod"}
{"level":"info","ts":"2026-11-25T15:01:58.195Z","logger":"source-kinds","msg":"Flux source kind served","version":"v1"}`
	if got := startedVersion(log); got != "226a144-dirty" {
		t.Errorf("startedVersion = %q", got)
	}
	if got := startedVersion(`{"msg":"other","version":"x"}`); got != "" {
		t.Errorf("startedVersion of another line = %q", got)
	}
}

func TestLogLineTimes(t *testing.T) {
	got := logLineTimes("2026-11-25T15:12:54.579263877Z start\n2026-11-25T15:12:54.633034509Z init-done\n" +
		"garbage\n2026-11-25T15:12:54.677833898Z apply-done\n2026-11-25T15:12:55Z apply-done\n")
	want := map[string]time.Time{
		"start":      time.Date(2026, 11, 25, 15, 12, 54, 579263877, time.UTC),
		"init-done":  time.Date(2026, 11, 25, 15, 12, 54, 633034509, time.UTC),
		"apply-done": time.Date(2026, 11, 25, 15, 12, 54, 677833898, time.UTC),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestPodMilestones(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "t1-runner-abc",
		OwnerReferences: []metav1.OwnerReference{{Kind: "Terraform", Name: "t1"}}}}
	if got := sampleOf(pod); got != "ns/t1" {
		t.Errorf("a runner Pod's sample: %s", got)
	}
	if got := sampleOf(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "raw-1"}}); got != "ns/raw-1" {
		t.Errorf("a raw Pod's sample: %s", got)
	}
	for _, tc := range []struct {
		name string
		mod  func(*corev1.Pod)
		want []string
	}{
		{"pending", func(*corev1.Pod) {}, []string{msPodCreated}},
		{"scheduled", func(p *corev1.Pod) { p.Spec.NodeName = "n" }, []string{msPodCreated, msPodScheduled}},
		{"running", func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		}, []string{msPodCreated, msPodScheduled, msRunning}},
		// Seen terminated without having been seen running: it ran.
		{"succeeded", func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}}
			p.Status.Phase = corev1.PodSucceeded
		}, []string{msPodCreated, msPodScheduled, msRunning, msExited, msSucceeded}},
	} {
		tc.mod(pod)
		if diff := cmp.Diff(tc.want, podMilestones(pod)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

func clusterSample() *ClusterReport {
	r := &ClusterReport{
		Date: "2025-01-01T00:00:00Z", Revision: "`abc`",
		Machine: Machine{CPUModel: "Test CPU", Cores: 2, MemoryGiB: 8, Engine: "OpenTofu v1.12.6", LoadStart: "1.00 1.00 1.00", LoadEnd: "2.00 1.00 1.00"},
		Cluster: ClusterSetup{Node: "node", Kubelet: "v1.36.4", Runtime: "containerd://1.6.20", ControllerImage: "c", RunnerImage: "localhost/runner:e2e",
			ControllerArgs: []string{"--runner=pod"}},
		Config: ClusterConfig{N: 5, Samples: 2, Namespace: "bench-cluster", IdleWindowSeconds: 10},
		Idle:   ClusterIdle{WindowSeconds: 10, CPU: ClusterCPU{APIServer: 0.2, Etcd: 0.1}},
		One: ClusterOne{
			RawSeconds: []float64{2.1, 2.0}, RawEngineSeconds: []float64{0.6, 0.6}, LandformSeconds: []float64{1.2, 1.3},
			RawMedian: 2.05, RawEngineMedian: 0.6, LandformMedian: 1.25, Ratio: 0.61, ExtraSeconds: -0.8, ExtraOverEngineSeconds: 0.65,
			LandformPhases: phaseStats(landformPhases, nil), RawPhases: phaseStats(rawPhases, nil),
			RunnerStartSeconds: []float64{0.7, 0.8}, RunnerStartMedian: 0.75,
			RawCPU: ClusterCPU{Pods: 0.1}, LandformCPU: ClusterCPU{Pods: 0.3, Controller: 0.06},
			RawAPIWritesByRes: map[string]float64{"pods": 2, "events": 5.5}, LandformAPIWritesByRes: map[string]float64{"secrets": 10},
		},
		Scale: ClusterScale{N: 5, AllReadySeconds: 4, RunnerPods: 5, MaxPodsAtOnce: 5, CPU: ClusterCPU{Pods: 2, APIServer: 1}, CPUPerObject: 0.6,
			RunsByAction: map[string]int{"plan": 5, "apply": 5}, RunsStarted: 10, APIWritesByRes: map[string]int{"pods": 10}},
	}
	var many []sampleTimes
	t0 := time.Unix(100, 0)
	for i := 1; i <= 20; i++ {
		many = append(many, sampleTimes{start: t0, at: map[string]time.Time{"recorded": t0.Add(time.Duration(i) * 100 * time.Millisecond)}})
	}
	r.Scale.Phases = phaseStats(scalePhases, many)
	r.Targets = r.targets()
	return r
}

func TestClusterTarget(t *testing.T) {
	r := clusterSample()
	if got := metOf(&Report{Targets: r.Targets}); got[clusterTargetOne] != "met" {
		t.Errorf("1.25 s against 2.05 s + 1.5 s: %s", got[clusterTargetOne])
	}
	r.One.LandformMedian, r.One.RawMedian = 3.6, 2
	r.Targets = r.targets()
	r.applyNotes(map[string]string{clusterTargetOne: "the runner Pod's start"})
	if got := r.Targets[0]; *got.Met || got.Why != "the runner Pod's start" {
		t.Errorf("3.6 s against 2 s + 1.5 s: met %v, why %q", *got.Met, got.Why)
	}

	r.One.LandformAPIWrites, r.One.RawAPIWrites = 37, 14
	r.One.LandformWrites = &OneObjectWrites{ByWriter: map[string]float64{"landform-controller": 19, "landform-runner": 2, "tofu": 1, "kubelet": 14, "kube-scheduler": 1, "bench harness": 1}}
	r.Targets = r.targets()
	got := metOf(&Report{Targets: r.Targets})
	if got[clusterTargetWrites] != "not met" || !strings.Contains(r.Targets[1].Measured, "37 (Landform's own 22, the rest Kubernetes' for the runner Pod); the raw engine's Pod 14") {
		t.Errorf("37 writes against 22: %s, %q", got[clusterTargetWrites], r.Targets[1].Measured)
	}
	if got[clusterTargetCPU] != "not met" { // 0.36 CPU-s against 0.1
		t.Errorf("3.6× the raw engine's CPU: %s (%s)", got[clusterTargetCPU], r.Targets[2].Measured)
	}
	r.One.LandformAPIWrites, r.One.LandformCPU = 22, ClusterCPU{Pods: 0.15}
	r.Targets = r.targets()
	if got := metOf(&Report{Targets: r.Targets}); got[clusterTargetWrites] != "met" || got[clusterTargetCPU] != "met" {
		t.Errorf("22 writes, 1.5× the CPU: %v", got)
	}

	// The raw engine's Pod keeping its state is told beside the bare
	// Pod, which alone decides.
	r.One.LandformCPU = ClusterCPU{Pods: 0.3}
	r.One.RawStateCPU, r.One.RawStateAPIWrites = &ClusterCPU{Pods: 0.25}, 20
	r.Targets = r.targets()
	got = metOf(&Report{Targets: r.Targets})
	if got[clusterTargetCPU] != "not met" || !strings.Contains(r.Targets[2].Measured, "vs the raw engine's Pod keeping its state in a Secret (0.25 CPU-s): 1.20×") {
		t.Errorf("3× the bare Pod, 1.2× the one keeping its state: %s, %q", got[clusterTargetCPU], r.Targets[2].Measured)
	}
	if !strings.Contains(r.Targets[1].Measured, "the raw engine's Pod keeping its state in a Secret 20") {
		t.Errorf("writes %q do not name the Pod keeping its state's", r.Targets[1].Measured)
	}
	if r.Targets[1].Note != "" {
		t.Errorf("a note without kept Pods: %q", r.Targets[1].Note)
	}
}

// A run whose controller keeps runner Pods for reuse says so where the Pod
// targets are judged, and in the reading: a sample is then not a Pod's
// whole life.
func TestClusterRunWithKeptPods(t *testing.T) {
	r := clusterSample()
	r.One.PodReuse, r.One.LandformPodsCreated = "30s", 1
	r.Scale.RunnerPods = 2
	r.Targets = r.targets()
	want := "runner Pods kept for reuse (`--runner-pod-reuse=30s`): 1 Pod(s) for 2 samples"
	for _, i := range []int{1, 2} {
		if r.Targets[i].Note != want {
			t.Errorf("%s: note %q, want %q", r.Targets[i].Name, r.Targets[i].Note, want)
		}
	}
	var b strings.Builder
	r.reading(func(format string, args ...any) { fmt.Fprintf(&b, format, args...) })
	if !strings.Contains(b.String(), "the 2 samples ran in 1 Pod(s), the 5 objects in 2.") {
		t.Errorf("the reading does not tell the Pods reused:\n%s", b.String())
	}
}

// TestRenderCluster renders the docs as `make bench-cluster` leaves
// them: the cluster run beside the default run, in a section of its own;
// without it, the page has no such section.
func TestRenderCluster(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "benchmarks.json")
	if got := clusterReportPath(main); got != filepath.Join(dir, "benchmarks-cluster.json") {
		t.Errorf("clusterReportPath = %s", got)
	}
	if err := writeReportFile(main, sample()); err != nil {
		t.Fatal(err)
	}
	md := filepath.Join(dir, "benchmarks.md")
	if err := render(main, md, "", false); err != nil {
		t.Fatal(err)
	}
	without, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(without, []byte("real cluster")) {
		t.Errorf("a page without a cluster run speaks of one:\n%s", without)
	}

	c := clusterSample()
	if err := writeReportFile(clusterReportPath(main), c); err != nil {
		t.Fatal(err)
	}
	back, err := readClusterReport(main)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c, back); diff != "" {
		t.Errorf("JSON round trip (-want +got):\n%s", diff)
	}
	if err := render(main, md, "", false); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	// The cluster run is not taken for a scale run, and the page is the
	// same as without it but for the section and the line pointing at it.
	if strings.Contains(out, "### 0 objects") {
		t.Errorf("the cluster run was rendered as a scale run:\n%s", out)
	}
	section := out[strings.Index(out, "\n## Runner Pods on a real cluster"):strings.Index(out, "\n## Not measured yet")]
	pointer := "The same trivial module with runner Pods on a real single-node cluster, `make bench-cluster`, is [below](#runner-pods-on-a-real-cluster).\n"
	if got := strings.Replace(strings.Replace(out, section, "", 1), pointer, "", 1); got != string(without) {
		t.Errorf("the rest of the page changed (-without +with):\n%s", cmp.Diff(string(without), got))
	}
	testenv.WantIn(t, "the cluster section", section,
		"| one object, runner Pod | ≤ the raw engine in a Pod + 1.5 s | 1.25 s vs 2.05 s (raw Pod: create → Succeeded): -0.80 s; vs the raw engine's end in its Pod (0.60 s): +0.65 s | yes |",
		"| raw engine in a Pod: create → `Succeeded` | 2.05 s | 2.10, 2.00 |",
		"| Landform: create → Ready + outputs Secret | 1.25 s | 1.20, 1.30 |",
		"| runner answering | the run recorded + the controller's `landform_runner_start_seconds` for the sample | 0.000 s |  |",
		"| Pods (runner or raw engine) | 0.100 | 0.300 | 0.000 |",
		"| runner Pods created / most at once (those being torn down included) | 5 / 5 |",
		"| runs started | 10 (apply 5, plan 5) |",
		"(5 runner Pods for 5 objects)",
		"median 0.75 s (0.70, 0.80)",
		"API writes by resource, per sample: raw engine's Pod events 5.5, pods 2; Landform object secrets 10.",
		// 20 objects' phases: p95 and max, not every sample.
		"| run recorded | the plan run recorded in the object's `status.run` (watch on the object) | 1.050 s | 1.905 s | 2.000 s |",
		"| init | the engine's `successfully initialized`",
	)
	var js bytes.Buffer
	if err := writeJSON(&js, c); err != nil {
		t.Fatal(err)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(js.Bytes(), &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"machine", "cluster", "idle", "oneObject", "scale", "targets"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("the JSON report has no %q", k)
		}
	}

	// With the raw engine's Pod keeping its state, a column of its own.
	c.One.RawStateCPU, c.One.RawStateAPIWrites, c.One.RawStateMedian = &ClusterCPU{Pods: 0.2}, 21, 2.5
	c.One.RawStateAPIWritesByRes = map[string]float64{"secrets": 2}
	if err := writeReportFile(clusterReportPath(main), c); err != nil {
		t.Fatal(err)
	}
	if err := render(main, md, "", false); err != nil {
		t.Fatal(err)
	}
	if b, err = os.ReadFile(md); err != nil {
		t.Fatal(err)
	}
	testenv.WantIn(t, "the cluster section with the raw engine's Pod keeping its state", string(b),
		"| CPU-s | raw engine's Pod | raw engine's Pod keeping its state | Landform object | idle cluster, 1.25 s |",
		"| Pods (runner or raw engine) | 0.100 | 0.200 | 0.300 | 0.000 |",
		"create → `Succeeded` median 2.50 s.",
		"keeping its state secrets 2; Landform object secrets 10.",
	)
}
