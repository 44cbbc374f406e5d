// Command bench is `make bench`: it starts its own control plane (envtest's
// kube-apiserver and etcd) and an artifact server standing in for
// source-controller, runs the real landform-controller binary with local
// runners as a child process, measures Landform beside the raw engine, and
// writes docs/benchmarks.md and docs/benchmarks.json. See docs/benchmarks.md
// for the method; the statistics and the report are in report.go.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/testenv"
	"github.com/landform-dev/landform/runner/server"
)

// module is the trivial module: one terraform_data, two outputs. The
// harness checks the outputs Secret for both.
const module = `resource "terraform_data" "this" {
  input = "bench"
}
output "id" { value = terraform_data.this.id }
output "input" { value = terraform_data.this.output }
`

const (
	concurrent     = 4
	concurrentRuns = 10
	// interval is every object's drift interval: longer than a run of the
	// harness, so that the idle and restart windows see no drift check.
	interval = time.Hour
)

type options struct {
	n                   int
	samples             int
	idle, restartWindow time.Duration
	driftInterval       time.Duration
	outMD, outJSON      string
	notes               string
	// Programs are the controller, the runner and OpenTofu.
	testenv.Programs
	revision, keep string
	providerMirror string
	// only names the one measurement to run ("ui", "writes"), or "" for
	// all.
	only string
}

// defaultN is the scale phase's N of `make bench`; a run at scaleRunN
// objects or more is a scale run, kept beside the default run's report
// (see reportPaths).
const (
	defaultN  = 20
	scaleRunN = 200
)

func main() {
	o := options{}
	flag.IntVar(&o.n, "n", envInt("BENCH_N", defaultN), "objects in the scale phase (BENCH_N)")
	flag.IntVar(&o.samples, "samples", envInt("BENCH_SAMPLES", 9), "samples of one object and of the raw engine (BENCH_SAMPLES)")
	flag.DurationVar(&o.idle, "idle", 30*time.Second, "idle window after convergence")
	flag.DurationVar(&o.restartWindow, "restart-window", time.Minute, "window after the controller's restart")
	flag.DurationVar(&o.driftInterval, "drift-interval", 20*time.Second, "the scale objects' interval in the drift phase, which counts runs over 3 intervals (0 skips it)")
	flag.StringVar(&o.outMD, "out-md", "docs/benchmarks.md", "markdown report")
	flag.StringVar(&o.outJSON, "out-json", "docs/benchmarks.json",
		fmt.Sprintf("JSON report of a default run; a run of -n %d or more writes <this without .json>-<n>.json instead, and -out-md renders both", scaleRunN))
	flag.StringVar(&o.notes, "notes", "hack/bench/notes.json", "why each target is not met: {\"target name\": \"explanation\"}, copied into the reports' targets that are not met")
	flag.StringVar(&o.Controller, "controller", "", "landform-controller binary (default $LANDFORM_CONTROLLER_BIN, else bin/landform-controller)")
	flag.StringVar(&o.Runner, "runner", "", "landform-runner binary (default $LANDFORM_RUNNER_BIN, else bin/landform-runner)")
	flag.StringVar(&o.Tofu, "tofu", "", "OpenTofu binary, for Landform's runners and the raw engine (default $LANDFORM_TOFU, else bin/tofu)")
	flag.StringVar(&o.providerMirror, "provider-mirror", "", "read-only provider filesystem mirror holding the landform provider (default bin/providers, of make tools)")
	flag.StringVar(&o.revision, "revision", "", "what was measured, for the report (default: git describe --always --dirty)")
	flag.StringVar(&o.keep, "keep", "", "keep the work directory (logs, controller work dir) here instead of removing it")
	flag.StringVar(&o.only, "only", os.Getenv("BENCH_ONLY"), "run only this measurement: ui (the UI's list page) or writes (the API writes of one "+
		"object's life, from the API server's audit log, and a typical object's timeline), merged into -out-json's existing report, which -out-md is rendered from again; "+
		"with -cluster, writes: the one-object samples' writes by writer, from the audit log of a cluster started with LANDFORM_CLUSTER_AUDIT=1 (BENCH_ONLY)")
	cluster := flag.Bool("cluster", false, "measure runner Pods on the single-node cluster of `make cluster-up` with Landform installed by its chart "+
		"(`make bench-cluster`): writes <-out-json without .json>-cluster.json and renders -out-md")
	co := clusterOptions{}
	flag.StringVar(&co.dir, "cluster-dir", envOr("LANDFORM_CLUSTER_DIR", "/var/lib/landform-cluster"), "the cluster's state: PID files, admin.kubeconfig, platform.env (LANDFORM_CLUSTER_DIR)")
	flag.StringVar(&co.ns, "cluster-namespace", "bench-cluster", "the runner namespace the cluster bench uses, of its own: it deletes its objects")
	flag.StringVar(&co.controllerNS, "cluster-controller-namespace", "landform-system", "the chart's release namespace")
	flag.IntVar(&co.n, "cluster-n", envInt("BENCH_CLUSTER_N", 50), "objects created at once on the cluster (BENCH_CLUSTER_N)")
	flag.StringVar(&co.containerd, "cluster-containerd", "/run/landform-cluster/containerd/containerd.sock", "the cluster's containerd socket, which names its shims")
	flag.StringVar(&co.cgroupRoot, "cgroup-root", "/sys/fs/cgroup", "where the cgroup hierarchies are mounted")
	flag.DurationVar(&co.idle, "cluster-idle", 10*time.Second, "the idle window measured before the cluster's samples")
	flag.StringVar(&co.peer.name, "cluster-peer", "", "measure -cluster-n objects of Landform and then of this controller (tofu-controller), "+
		"installed by e2e/cluster/bench-peer.sh, instead of the usual run (`make bench-cluster-peer`): writes <-out-json without .json>-cluster-<peer>.json")
	flag.StringVar(&co.peer.ns, "cluster-peer-namespace", "bench-peer", "the peer's objects' namespace, of the bench's own: it deletes its objects")
	flag.StringVar(&co.peer.controllerNS, "cluster-peer-controller-namespace", "tofu-system", "the peer chart's release namespace")
	flag.StringVar(&co.peer.source, "cluster-peer-source", "", "what the peer was built from, for the report")
	renderFrom := flag.String("render", "", "only render this default run's JSON report (and its scale runs beside it) again as -out-md, "+
		"after applying -notes to them (after a change to the report's text or the notes)")
	flag.Parse()
	if *renderFrom != "" {
		if err := render(*renderFrom, o.outMD, o.notes, true); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *cluster {
		if err := runCluster(o, co); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	switch o.only {
	case "":
	case "ui", "writes":
		runOnly := runUIList
		if o.only == "writes" {
			runOnly = runWrites
		}
		if err := runOnly(o); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	default:
		fmt.Fprintf(os.Stderr, "bench: -only (BENCH_ONLY) %q: the measurements that run alone are ui and writes\n", o.only)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil && v > 0 {
		return v
	}
	return def
}

// bench is the running environment.
type bench struct {
	o          options
	tmp        string
	env        *testenv.Env
	c          client.WithWatch
	kube       *kubernetes.Clientset
	kubeconfig string
	apiPID     int
	etcdPID    int
	art        *testenv.Artifacts
	tr         *tracker
	ctrl       *controller
	engines    *engineCounter
	cloud      *cloudServer
}

// newBench finds the tools, names the revision, and makes the work
// directory and the bench that works in it; removeTmp removes the
// directory (unless -keep).
func newBench(o options) (b *bench, removeTmp func(), err error) {
	if err := findTools(&o); err != nil {
		return nil, nil, err
	}
	if o.revision == "" {
		o.revision = gitRevision()
	}
	tmp, removeTmp, err := workDir(o.keep)
	if err != nil {
		return nil, nil, err
	}
	return &bench{o: o, tmp: tmp, tr: newTracker()}, removeTmp, nil
}

func run(o options) error {
	b, removeTmp, err := newBench(o)
	if err != nil {
		return err
	}
	defer removeTmp()
	o, tmp := b.o, b.tmp
	if len(server.MirroredProviders(o.providerMirror)) == 0 {
		return fmt.Errorf("%s holds no provider: run `make tools`", o.providerMirror)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	r := &Report{Date: time.Now().UTC().Format(time.RFC3339), Revision: o.revision}
	r.Machine.CPUModel, r.Machine.MemoryGiB = cpuInfo()
	r.Machine.Cores = runtime.NumCPU()
	r.Machine.Kernel = readTrim("/proc/sys/kernel/osrelease")
	r.Machine.Go = runtime.Version()
	r.Machine.LoadStart = loadAvg()
	r.Machine.Engine = engineVersion(o.Tofu)
	r.Config = Config{N: o.n, Samples: o.samples, Concurrent: concurrent, ConcurrentRuns: concurrentRuns,
		IdleWindowS: o.idle.Seconds(), RestartWindowS: o.restartWindow.Seconds(), Interval: interval.String()}

	if err := b.startEngine(r.Machine.Engine); err != nil {
		return err
	}
	defer b.cloud.srv.Close()
	if r.EngineWrapper, err = wrapperCost(filepath.Join(tmp, "engine-cost"), 21); err != nil {
		return err
	}
	if err := b.startControlPlane(nil); err != nil {
		return err
	}
	defer func() { _ = b.env.Stop() }()
	// First, before the controller starts: no controller may reconcile
	// the UI's objects, and they are gone before the other phases.
	if r.UIList, err = measureUIList(ctx, b.c, b.env.Config); err != nil {
		return fmt.Errorf("UI list page: %w", err)
	}
	r.UIList.Date, r.UIList.Revision = r.Date, r.Revision
	if b.art, err = testenv.StartArtifacts(filepath.Join(tmp, "artifacts")); err != nil {
		return err
	}
	defer b.art.Close()
	b.tr.start(ctx, b.c, "")

	for _, ns := range []string{"bench-raw", "bench-one", "bench-cloud", "bench-scale"} {
		if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	revOne, err := b.publish(ctx, "bench-one", module+"# bench-one\n")
	if err != nil {
		return err
	}
	revCloud, err := b.publish(ctx, "bench-cloud", cloudModule+"# bench-cloud\n")
	if err != nil {
		return err
	}
	revScale, err := b.publish(ctx, "bench-scale", module+"# bench-scale\n")
	if err != nil {
		return err
	}

	work := filepath.Join(tmp, "controller")
	if b.ctrl, err = b.startController(work, "controller-1.log"); err != nil {
		return err
	}
	defer b.stopController(work)

	if err := b.overhead(ctx, &r.Overhead, overheadCase{module: module, ns: "bench-one", prefix: "one", rev: revOne}); err != nil {
		return fmt.Errorf("overhead: %w", err)
	}
	if err := b.overhead(ctx, &r.OverheadCloud, overheadCase{module: cloudModule, ns: "bench-cloud", prefix: "cloud", rev: revCloud, cloud: true}); err != nil {
		return fmt.Errorf("overhead, cloud module: %w", err)
	}
	if err := b.initPhase(r); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	if err := b.scale(ctx, r, revScale); err != nil {
		return fmt.Errorf("scale: %w", err)
	}
	if err := b.newRevision(ctx, r); err != nil {
		return fmt.Errorf("new revision: %w", err)
	}
	if err := b.idle(ctx, r); err != nil {
		return fmt.Errorf("idle: %w", err)
	}
	if err := b.restart(ctx, r, work); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	if err := b.drift(ctx, r); err != nil {
		return fmt.Errorf("drift: %w", err)
	}
	targets, err := endRun(&r.Machine, r.targets, o.notes)
	if err != nil {
		return err
	}
	r.Targets = targets
	js := o.outJSON
	if o.n >= scaleRunN {
		js = scaleRunPath(o.outJSON, o.n)
	}
	// The writes of one object are measured apart: a run keeps the ones
	// its report had.
	if old, err := readReport(js); err == nil {
		r.OneObjectWrites, r.OneObjectWritesBefore = old.OneObjectWrites, old.OneObjectWritesBefore
	}
	if err := writeReportFile(js, r); err != nil {
		return err
	}
	log("wrote %s", js)
	return render(o.outJSON, o.outMD, o.notes, false)
}

// workDir is the bench's work directory: keep when given (kept after
// the run), else a temporary one that remove removes.
func workDir(keep string) (dir string, remove func(), err error) {
	if keep != "" {
		return keep, func() {}, os.MkdirAll(keep, 0o755)
	}
	dir, err = os.MkdirTemp("", "landform-bench-")
	if err != nil {
		return "", nil, err
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// engineVersion is the first line of `tofu version`.
func engineVersion(tofu string) string {
	version := exec.Command(tofu, "version")
	version.Env = append(cleanEnv(), "CHECKPOINT_DISABLE=1")
	out, _ := version.Output()
	first, _, _ := strings.Cut(string(out), "\n")
	return first
}

// startEngine builds the counting wrapper every engine process goes
// through, the raw engine's and Landform's runners' alike, for the engine
// of version (engineVersion), and starts the stand-in cloud the cloud
// module's provider reaches.
func (b *bench) startEngine(version string) error {
	b.engines = &engineCounter{file: filepath.Join(b.tmp, "engine-processes")}
	var err error
	if b.engines.wrapper, err = buildEngineCounter(filepath.Join(b.tmp, "engine"), wrapperName(version), b.o.Tofu, b.engines.file); err != nil {
		return err
	}
	b.cloud = startCloud()
	return nil
}

// startControlPlane starts kube-apiserver, with apiServerFlags, and etcd,
// and the harness's clients of them.
func (b *bench) startControlPlane(apiServerFlags map[string]string) error {
	log("starting kube-apiserver and etcd")
	var err error
	if b.env, err = testenv.StartWith(apiServerFlags); err != nil {
		return err
	}
	if b.c, err = client.NewWithWatch(b.env.Config, client.Options{Scheme: b.env.Scheme}); err != nil {
		return err
	}
	if b.kube, err = kubernetes.NewForConfig(b.env.Config); err != nil {
		return err
	}
	b.kubeconfig = filepath.Join(b.tmp, "kubeconfig")
	if err := placement.WriteKubeconfig(b.env.Config, b.kubeconfig); err != nil {
		return err
	}
	if b.apiPID, err = childByName(os.Getpid(), "kube-apiserver"); err != nil {
		return err
	}
	b.etcdPID, err = childByName(os.Getpid(), "etcd")
	return err
}

// stopController stops the controller and the local runners it started
// on work: they are detached, and outlive their controller on purpose
// (until --idle-exit, 6 h), but the bench is done with them.
func (b *bench) stopController(work string) {
	b.ctrl.stop()
	testenv.KillLocalRunners(work)
}

// gitRevision is what is measured: `git describe --always --dirty`, as
// code.
func gitRevision() string {
	out, _ := exec.Command("git", "describe", "--always", "--dirty").Output()
	return "`" + strings.TrimSpace(string(out)) + "`"
}

// writeReportFile writes a report (a Report or a ClusterReport) to path as
// indented JSON.
func writeReportFile(path string, report any) error {
	var b bytes.Buffer
	if err := writeJSON(&b, report); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// readJSONFile reads the JSON file at path into v.
func readJSONFile(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// scaleRunPath is where a scale run of n objects is kept beside the
// default run's report main: docs/benchmarks-200.json.
func scaleRunPath(main string, n int) string {
	return fmt.Sprintf("%s-%d.json", strings.TrimSuffix(main, ".json"), n)
}

// readReport reads a JSON report.
func readReport(path string) (*Report, error) {
	var r Report
	if err := readJSONFile(path, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// scaleRuns reads the scale runs kept beside main (main's name without
// .json, a dash and N), by N.
func scaleRuns(main string) ([]*Report, []string, error) {
	paths, err := filepath.Glob(strings.TrimSuffix(main, ".json") + "-*.json")
	if err != nil {
		return nil, nil, err
	}
	var runs []*Report
	var kept []string
	for _, p := range paths {
		suffix := strings.TrimSuffix(strings.TrimPrefix(p, strings.TrimSuffix(main, ".json")+"-"), ".json")
		if _, err := strconv.Atoi(suffix); err != nil {
			continue
		}
		r, err := readReport(p)
		if err != nil {
			return nil, nil, err
		}
		runs = append(runs, r)
		kept = append(kept, p)
	}
	sortByN(runs, kept)
	return runs, kept, nil
}

// render writes md from the default run's JSON report main and the scale
// runs beside it, with the notes applied; rewrite also writes the notes
// back into the JSON reports.
func render(main, md, notesPath string, rewrite bool) error {
	notes, err := readNotes(notesPath)
	if err != nil {
		return err
	}
	r, err := readReport(main)
	if errors.Is(err, os.ErrNotExist) {
		log("no default run at %s: run `make bench` for %s", main, md)
		return nil
	}
	if err != nil {
		return err
	}
	runs, paths, err := scaleRuns(main)
	if err != nil {
		return err
	}
	r.applyNotes(notes)
	for _, s := range runs {
		s.applyNotes(notes)
	}
	cluster, err := readClusterReport(main)
	if err != nil {
		return err
	}
	if cluster != nil {
		cluster.applyNotes(notes)
	}
	if rewrite {
		if cluster != nil {
			if err := writeReportFile(clusterReportPath(main), cluster); err != nil {
				return err
			}
		}
		for i, s := range append([]*Report{r}, runs...) {
			path := main
			if i > 0 {
				path = paths[i-1]
			}
			if err := writeReportFile(path, s); err != nil {
				return err
			}
		}
	}
	var mb bytes.Buffer
	peer, err := readComparison(main, "tofu-controller")
	if err != nil {
		return err
	}
	if peer != nil {
		peer.applyNotes(notes)
		if rewrite {
			if err := writeReportFile(comparisonPath(main, peer.Peer.Name), peer); err != nil {
				return err
			}
		}
	}
	if err := r.writeMarkdownWith(&mb, cluster, peer, runs...); err != nil {
		return err
	}
	if err := os.WriteFile(md, mb.Bytes(), 0o644); err != nil {
		return err
	}
	log("wrote %s from %s, %d scale runs and %d cluster runs", md, main, len(runs), map[bool]int{true: 1}[cluster != nil])
	return nil
}

// endRun records the load average at a run's end and the run's targets,
// with the notes on those not met: the default run's and the cluster
// run's alike.
func endRun(m *Machine, targets func() []Target, notesPath string) ([]Target, error) {
	m.LoadEnd = loadAvg()
	r := Report{Targets: targets()}
	notes, err := readNotes(notesPath)
	if err != nil {
		return nil, err
	}
	r.applyNotes(notes)
	return r.Targets, nil
}

// readNotes reads the explanations of targets not met; a missing file is
// no notes.
func readNotes(path string) (map[string]string, error) {
	if path == "" {
		return nil, nil
	}
	var notes map[string]string
	if err := readJSONFile(path, &notes); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return notes, nil
}

func log(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "bench %s: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
}

func loadAvg() string {
	f := strings.Fields(readTrim("/proc/loadavg"))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// overheadCase is one module measured by overhead.
type overheadCase struct {
	module string
	ns     string // of its GitRepository and objects
	prefix string // of the objects' and raw samples' names
	rev    string
	// cloud: the module creates a security group named var.name in the
	// stand-in cloud, counted there after the samples.
	cloud bool
}

// overhead alternates the raw engine and one Landform object on c's module.
func (b *bench) overhead(ctx context.Context, o *Overhead, c overheadCase) error {
	var rawCPU, rawEngine, rawWrites, lfCPU []float64
	var names []string
	startEngines := b.engines.counts()
	startSum, startCount, err := b.ctrl.runnerStarts()
	if err != nil {
		return err
	}
	for i := 0; i < b.o.samples; i++ {
		before, err := b.snap(ctx)
		if err != nil {
			return err
		}
		rawName := fmt.Sprintf("raw-%s-%d", c.prefix, i)
		secs, engine, err := b.raw(rawName, c.module)
		if err != nil {
			return err
		}
		after, err := b.snap(ctx)
		if err != nil {
			return err
		}
		d := after.sub(before)
		o.RawSeconds = append(o.RawSeconds, secs)
		rawEngine = append(rawEngine, engine)
		rawCPU = append(rawCPU, engine+d.cpu.APIServer+d.cpu.Etcd)
		rawWrites = append(rawWrites, float64(sum(d.writes)))

		before = after
		name := fmt.Sprintf("%s-%d", c.prefix, i)
		names = append(names, rawName, name)
		start, done, err := b.oneObject(ctx, c.ns, name, c.rev)
		if err != nil {
			return err
		}
		after, err = b.snap(ctx)
		if err != nil {
			return err
		}
		d = after.sub(before)
		o.LandformSeconds = append(o.LandformSeconds, done.Sub(start).Seconds())
		lfCPU = append(lfCPU, d.cpu.Total())
		log("overhead sample %d (%s): raw %.2fs, landform %.2fs", i, c.prefix, secs, o.LandformSeconds[i])
	}
	// Let a runner's last engine process, if any comes after Ready, land
	// in this module's count.
	time.Sleep(time.Second)
	engines := b.engines.counts()
	o.Module = c.prefix
	o.RawEngineProcs = perRun(diff(startEngines[callerRaw], engines[callerRaw]), b.o.samples)
	o.LandformEngineProcs = perRun(diff(startEngines[callerLandform], engines[callerLandform]), b.o.samples)
	o.RawMedian, o.LandformMedian = median(o.RawSeconds), median(o.LandformSeconds)
	o.Ratio = ratio(o.LandformMedian, o.RawMedian)
	o.RawCPUPerRun, o.RawEngineCPUPerRun, o.RawAPIWritesPerRun = median(rawCPU), median(rawEngine), median(rawWrites)
	o.LandformCPUPerObj = median(lfCPU)
	endSum, endCount, err := b.ctrl.runnerStarts()
	if err != nil {
		return err
	}
	if n := endCount - startCount; n > 0 {
		o.RunnerStartSeconds = (endSum - startSum) / n
	}
	if c.cloud {
		if err := b.cloud.check(ctx, names); err != nil {
			return err
		}
		o.CloudResourcesChecked = len(names)
	}
	return nil
}

// oneObject creates the bench's object ns/name and waits until it is
// done at revision rev (Ready, its outputs Secret written), and returns
// when the create was sent and when the object was seen done.
func (b *bench) oneObject(ctx context.Context, ns, name, rev string) (start, done time.Time, err error) {
	start = time.Now()
	if err := b.createTerraform(ctx, ns, name); err != nil {
		return start, done, err
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	seen, err := b.tr.wait(wctx, []string{ns + "/" + name}, rev)
	if err != nil {
		return start, done, fmt.Errorf("%s did not become Ready with its outputs: %w (see %s)", name, err, b.ctrl.logPath)
	}
	return start, seen[ns+"/"+name], nil
}

// raw runs the engine by hand on the module with the kubernetes backend in
// a fresh directory, with the CLI configuration Landform's runners get,
// and returns its wall time and CPU (its processes and their reaped
// children: providers, if any). name is the state's Secret suffix and the
// module's var.name.
func (b *bench) raw(name, mod string) (secs, cpu float64, err error) {
	dir := filepath.Join(b.tmp, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, 0, err
	}
	backend := fmt.Sprintf("terraform {\n  backend \"kubernetes\" {\n    secret_suffix = %q\n    namespace     = \"bench-raw\"\n    config_path   = %q\n  }\n}\n",
		name, b.kubeconfig)
	cliConfig, err := server.CLIConfig([]string{b.o.providerMirror})
	if err != nil {
		return 0, 0, err
	}
	files := map[string]string{"main.tf": mod, "backend.tf": backend, "cli.tfrc": cliConfig}
	if strings.Contains(mod, `variable "name"`) {
		files["terraform.tfvars"] = fmt.Sprintf("name = %q\n", name)
	}
	for file, body := range files {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o600); err != nil {
			return 0, 0, err
		}
	}
	start := time.Now()
	for _, args := range [][]string{
		{"init", "-input=false", "-no-color"},
		{"plan", "-input=false", "-no-color", "-out=plan.out"},
		{"apply", "-input=false", "-no-color", "plan.out"},
		{"output", "-json"},
	} {
		cmd := exec.Command(b.engines.wrapper, args...)
		cmd.Dir = dir
		cmd.Env = append(b.engineEnv(callerRaw), "TF_CLI_CONFIG_FILE="+filepath.Join(dir, "cli.tfrc"), "TF_IN_AUTOMATION=1", "HOME="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return 0, 0, fmt.Errorf("tofu %s: %w\n%s", args[0], err, out)
		}
		cpu += cmd.ProcessState.UserTime().Seconds() + cmd.ProcessState.SystemTime().Seconds()
	}
	return time.Since(start).Seconds(), cpu, nil
}

// engineEnv is the environment of the raw engine and of the controller
// (its runners' engines inherit it): the stand-in cloud's URL for the
// provider, and who runs the engine for the counter.
func (b *bench) engineEnv(caller string) []string {
	return append(cleanEnv(), "CHECKPOINT_DISABLE=1", cloudEndpointEnv+"="+b.cloud.srv.URL, "BENCH_ENGINE_CALLER="+caller)
}

// cleanEnv is the environment without the machine's Terraform settings.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "TF_CLI_CONFIG_FILE", "TF_IN_AUTOMATION", "KUBECONFIG", cloudEndpointEnv, "LANDFORM_CLOUD_TOKEN", "BENCH_ENGINE_CALLER":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// scale creates N objects at once on one GitRepository.
func (b *bench) scale(ctx context.Context, r *Report, rev string) error {
	n := b.o.n
	before, err := b.snap(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	keys := scaleKeys(n)
	created, err := b.createAll(ctx, keys)
	if err != nil {
		return err
	}
	log("created %d objects in %.1fs", n, time.Since(start).Seconds())
	done, err := b.waitAll(ctx, keys, rev, "Ready")
	if err != nil {
		return fmt.Errorf("%d of %d objects done: %w (see %s)", len(done), n, err, b.ctrl.logPath)
	}
	after, err := b.snap(ctx)
	if err != nil {
		return err
	}
	d := after.sub(before)
	lat, last := latencies(done, func(k string) time.Time { return created[k] })
	s := &r.Scale
	s.N = n
	s.AllReadySeconds = last.Sub(start).Seconds()
	s.P50Seconds, s.P95Seconds, s.MaxSeconds = percentile(lat, 50), percentile(lat, 95), percentile(lat, 100)
	s.CPU = d.cpu
	s.CPUPerObject = d.cpu.Total() / float64(n)
	s.CPUBound = d.cpu.Total() / float64(r.Machine.Cores)
	s.ControllerPeakMiB = peakRSSMiB(b.ctrl.PID())
	runs := b.tr.runsSince(start)
	s.RunsStarted = len(runs)
	s.RunsByAction = map[string]int{}
	for _, run := range runs {
		s.RunsByAction[run.action]++
	}
	s.ArtifactDownloads = d.downloads
	s.EngineProcs = d.engines[callerLandform]
	s.EngineProcsPerObject = float64(sum(s.EngineProcs)) / float64(n)
	s.APIWritesByRes = d.writes
	s.APIWritesByRes["terraforms"] -= n // the harness's own creates
	s.APIWrites = sum(s.APIWritesByRes)
	s.APIWritesPerObject = float64(s.APIWrites) / float64(n)
	r.Machine.OthersCPUs = d.busy - d.cpu.Total() - d.harness
	log("scale: %d objects all done in %.1fs (p50 %.1fs, p95 %.1fs), %.1f CPU-s", n, s.AllReadySeconds, s.P50Seconds, s.P95Seconds, d.cpu.Total())
	return nil
}

// latencies returns, for the objects done (key: when), how long each took
// since its start, and when the last was done.
func latencies(done map[string]time.Time, start func(key string) time.Time) ([]float64, time.Time) {
	var lat []float64
	var last time.Time
	for k, at := range done {
		lat = append(lat, at.Sub(start(k)).Seconds())
		if at.After(last) {
			last = at
		}
	}
	return lat, last
}

func scaleKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench-scale/obj-%04d", i)
	}
	return keys
}

// createAll creates the objects keys from a few goroutines (the API
// server, not the harness, should set the pace at 1000 objects) and
// returns when each create was sent.
func (b *bench) createAll(ctx context.Context, keys []string) (map[string]time.Time, error) {
	return createAll(ctx, keys, b.createTerraform)
}

// createAll calls create for each of keys ("namespace/name") from a few
// goroutines and returns when each call was made.
func createAll(ctx context.Context, keys []string, create func(ctx context.Context, ns, name string) error) (map[string]time.Time, error) {
	const workers = 8
	var mu sync.Mutex
	created := map[string]time.Time{}
	next := make(chan string)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for key := range next {
				ns, name, _ := strings.Cut(key, "/")
				at := time.Now()
				if err := create(ctx, ns, name); err != nil {
					errs <- fmt.Errorf("creating %s: %w", key, err)
					return
				}
				mu.Lock()
				created[key] = at
				mu.Unlock()
			}
		}()
	}
	var err error
feed:
	for _, k := range keys {
		select {
		case next <- k:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil && len(errs) > 0 {
		err = <-errs
	}
	return created, err
}

// waitTimeout bounds a wait for n objects: generous (the machine may be
// shared), but proportional to n so that a stuck run ends the bench.
func waitTimeout(n int) time.Duration { return 5*time.Minute + time.Duration(n)*5*time.Second }

// waitAll waits for keys at revision, logging progress every 30 seconds.
func (b *bench) waitAll(ctx context.Context, keys []string, rev, what string) (map[string]time.Time, error) {
	return waitAll(ctx, b.tr, keys, rev, what)
}

// waitAll waits until tr has seen every one of keys done at revision,
// logging progress every 30 seconds.
func waitAll(ctx context.Context, tr *tracker, keys []string, rev, what string) (map[string]time.Time, error) {
	wctx, cancel := context.WithTimeout(ctx, waitTimeout(len(keys)))
	defer cancel()
	go func() {
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
				log("%d of %d objects %s", tr.count(keys, rev), len(keys), what)
			}
		}
	}()
	return tr.wait(wctx, keys, rev)
}

// newRevision publishes a new artifact for the scale GitRepository and
// waits until every object has applied it.
func (b *bench) newRevision(ctx context.Context, r *Report) error {
	before, err := b.snap(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	rev, err := b.publish(ctx, "bench-scale", module+"# bench-scale, revision 2\n")
	if err != nil {
		return err
	}
	keys := scaleKeys(b.o.n)
	done, err := b.waitAll(ctx, keys, rev, "applied the new revision")
	if err != nil {
		return fmt.Errorf("%d of %d objects applied the new revision: %w (see %s)", len(done), b.o.n, err, b.ctrl.logPath)
	}
	after, err := b.snap(ctx)
	if err != nil {
		return err
	}
	d := after.sub(before)
	lat, last := latencies(done, func(string) time.Time { return start })
	n := &r.NewRev
	n.AllReadySeconds = last.Sub(start).Seconds()
	n.P50Seconds, n.P95Seconds = percentile(lat, 50), percentile(lat, 95)
	n.CPU = d.cpu
	n.RunsStarted = len(b.tr.runsSince(start))
	n.ArtifactDownloads = d.downloads
	n.EngineProcs = d.engines[callerLandform]
	n.APIWritesPerObject = float64(sum(d.writes)-1) / float64(b.o.n) // less the harness's status update
	log("new revision: all applied in %.1fs", n.AllReadySeconds)
	return nil
}

// idle watches a window with nothing changed.
func (b *bench) idle(ctx context.Context, r *Report) error {
	time.Sleep(2 * time.Second) // let the last status writes land
	before, err := b.snap(ctx)
	if err != nil {
		return err
	}
	log("idle for %s", b.o.idle)
	time.Sleep(b.o.idle)
	after, err := b.snap(ctx)
	if err != nil {
		return err
	}
	d := after.sub(before)
	r.Idle = Idle{
		WindowSeconds:   after.at.Sub(before.at).Seconds(),
		RunsStarted:     len(b.tr.runsSince(before.at)),
		ControllerCPU:   d.cpu.Controller,
		ControllerCores: d.cpu.Controller / after.at.Sub(before.at).Seconds(),
		APIWrites:       sum(d.writes),
		APIWritesByRes:  d.writes,
		EngineProcs:     sum(d.engines[callerLandform]),
	}
	return nil
}

// restart stops the controller (SIGTERM) and starts it again on the same
// work directory.
func (b *bench) restart(ctx context.Context, r *Report, work string) error {
	b.ctrl.stop()
	before, err := b.snap(ctx)
	if err != nil {
		return err
	}
	log("restarting the controller; watching for %s", b.o.restartWindow)
	start := time.Now()
	if b.ctrl, err = b.startController(work, "controller-2.log"); err != nil {
		return err
	}
	time.Sleep(b.o.restartWindow - time.Since(start))
	after, err := b.snap(ctx)
	if err != nil {
		return err
	}
	d := after.sub(before)
	r.Restart = Restart{
		WindowSeconds:     after.at.Sub(start).Seconds(),
		RunsStarted:       len(b.tr.runsSince(start)),
		Budget:            concurrentRuns,
		CPU:               d.cpu,
		APIWrites:         sum(d.writes),
		APIWritesByRes:    d.writes,
		EngineProcs:       sum(d.engines[callerLandform]),
		ControllerPeakMiB: peakRSSMiB(b.ctrl.PID()),
	}
	return nil
}

// createTerraform creates an object of ns's GitRepository; in
// bench-cloud, its var.name is its own name (its security group's).
func (b *bench) createTerraform(ctx context.Context, ns, name string) error {
	return b.c.Create(ctx, terraformObject(ns, name))
}

// terraformObject is the bench's Terraform object: ns's GitRepository
// "repo", auto-approved, its outputs written to a Secret.
func terraformObject(ns, name string) *infrav1.Terraform {
	obj := &infrav1.Terraform{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: infrav1.TerraformSpec{
			SourceRef:            infrav1.SourceReference{Kind: sourcev1.GitRepositoryKind, Name: "repo"},
			Path:                 "./",
			Interval:             metav1.Duration{Duration: interval},
			ApprovePlan:          infrav1.ApprovePlanAuto,
			WriteOutputsToSecret: &infrav1.WriteOutputsToSecretSpec{Name: name + "-outputs"},
		},
	}
	if ns == "bench-cloud" {
		obj.Spec.Vars = []infrav1.Variable{{Name: "name", Value: &apiextensionsv1.JSON{Raw: []byte(strconv.Quote(name))}}}
	}
	return obj
}

// snapshot is the counters at one moment.
type snapshot struct {
	at                 time.Time
	ctrlPID            int
	ctrlSelf, ctrlKids float64
	api, etcd          float64
	busy, harness      float64
	writes             map[string]int
	downloads          int
	engines            map[string]map[string]int
}

func (b *bench) snap(ctx context.Context) (snapshot, error) {
	raw, err := b.kube.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return snapshot{}, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	s := snapshot{at: time.Now(), writes: apiWrites(string(raw)), downloads: b.art.Downloads(), busy: machineBusy(), engines: b.engines.counts()}
	procs := allProcs()
	for _, p := range procs {
		switch p.pid {
		case b.apiPID:
			s.api = p.self
		case b.etcdPID:
			s.etcd = p.self
		case os.Getpid():
			s.harness = p.self
		}
		if b.ctrl != nil && p.pid == b.ctrl.PID() && !b.ctrl.Exited() {
			s.ctrlPID = p.pid
			s.ctrlSelf = p.self
			s.ctrlKids = p.children + descendantsCPU(p.pid, procs)
		}
	}
	return s, nil
}

// delta is what happened between two snapshots.
type delta struct {
	cpu       CPU
	busy      float64
	harness   float64
	writes    map[string]int
	downloads int
	engines   map[string]map[string]int // caller -> subcommand -> processes
}

func (s snapshot) sub(before snapshot) delta {
	d := delta{
		cpu:       CPU{APIServer: s.api - before.api, Etcd: s.etcd - before.etcd},
		busy:      s.busy - before.busy,
		harness:   s.harness - before.harness,
		writes:    diff(before.writes, s.writes),
		downloads: s.downloads - before.downloads,
		engines:   map[string]map[string]int{},
	}
	for caller, subs := range s.engines {
		d.engines[caller] = diff(before.engines[caller], subs)
	}
	if s.ctrlPID == before.ctrlPID {
		d.cpu.Controller, d.cpu.Runners = s.ctrlSelf-before.ctrlSelf, s.ctrlKids-before.ctrlKids
	} else { // a new controller: everything it did is in the window
		d.cpu.Controller, d.cpu.Runners = s.ctrlSelf, s.ctrlKids
	}
	return d
}

// controller is landform-controller as the bench runs it (testenv's
// harness), its output in logPath.
type controller struct {
	*testenv.Controller
	logPath string
	logFile *os.File
}

// scrape reads the metrics exposition served at url.
func scrape(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// runnerStarts reads the controller's landform_runner_start_seconds
// histogram for local runners: the sum of the start times and their count.
func (c *controller) runnerStarts() (sum, count float64, err error) {
	return runnerStarts(c.MetricsURL, "local")
}

// runnerStarts reads the landform_runner_start_seconds histogram of the
// controller serving metrics at url, for runners of placement (local or
// pod): the sum of the start times and their count.
func runnerStarts(url, placement string) (sum, count float64, err error) {
	body, err := scrape(url)
	if err != nil {
		return 0, 0, err
	}
	for name, into := range map[string]*float64{"landform_runner_start_seconds_sum": &sum, "landform_runner_start_seconds_count": &count} {
		samples, err := metricSamples(body, name)
		if err != nil {
			return 0, 0, fmt.Errorf("controller %w", err)
		}
		for _, s := range samples {
			if s.labels["placement"] == placement {
				*into = s.value
			}
		}
	}
	return sum, count, nil
}

// stop sends SIGTERM and waits (its process group is killed after a
// minute).
func (c *controller) stop() {
	_ = c.Stop()
	c.logFile.Close()
}

// startController starts the controller with local runners, the counting
// engine wrapper and the provider mirror on work, its output in logName,
// and waits until it serves metrics: the manager has started.
func (b *bench) startController(work, logName string) (*controller, error) {
	logPath := filepath.Join(b.tmp, logName)
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := []string{"--provider-mirror=" + b.o.providerMirror,
		"--concurrent=" + strconv.Itoa(concurrent), "--concurrent-runs=" + strconv.Itoa(concurrentRuns)}
	// BENCH_CONTROLLER_ARGS adds flags, e.g. --log-level=debug to see
	// where a run's time goes.
	args = append(args, strings.Fields(os.Getenv("BENCH_CONTROLLER_ARGS"))...)
	c := testenv.NewController(testenv.ControllerOptions{
		Binary: b.o.Controller, Kubeconfig: b.kubeconfig,
		Runner: "local", RunnerBinary: b.o.Runner, Engine: b.engines.wrapper, WorkDir: work,
		Metrics: true, Args: args,
		Environ: b.engineEnv(callerLandform), Output: logFile,
	})
	if err := c.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("the controller did not start: %w (see %s)", err, logPath)
	}
	return &controller{Controller: c, logPath: logPath, logFile: logFile}, nil
}

// findTools finds the programs the bench runs: the ones its flags name,
// else the ones testenv finds ($LANDFORM_CONTROLLER_BIN,
// $LANDFORM_RUNNER_BIN, $LANDFORM_TOFU, else the repository's bin/), and
// the provider mirror. A missing one is an error that says what to run.
func findTools(o *options) error {
	if err := o.Programs.Find(); err != nil {
		return err
	}
	var err error
	if o.providerMirror == "" {
		o.providerMirror, err = testenv.Tool("providers", "")
	} else if _, err = os.Stat(o.providerMirror); err != nil {
		err = &testenv.MissingToolError{Names: []string{"providers"}, Where: o.providerMirror, Err: err}
	}
	if err != nil {
		return err
	}
	o.providerMirror, err = filepath.Abs(o.providerMirror)
	return err
}

// publish packs body as main.tf (each namespace and revision with its own
// text, so its own digest) as ns's GitRepository "repo"'s artifact,
// creating the GitRepository the first time, and returns the revision.
func (b *bench) publish(ctx context.Context, ns, body string) (string, error) {
	return b.art.Publish(ctx, b.c, ns, map[string]string{"main.tf": body})
}
