// Command bench is `make bench`: it starts its own control plane (envtest's
// kube-apiserver and etcd) and an artifact server standing in for
// source-controller, runs the real landform-controller binary with local
// runners as a child process, measures Landform beside the raw engine, and
// writes docs/benchmarks.md and docs/benchmarks.json. See docs/benchmarks.md
// for the method; the statistics and the report are in report.go.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/testenv"
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
	n                    int
	samples              int
	idle, restartWindow  time.Duration
	outMD, outJSON       string
	controller, runner   string
	tofu, revision, keep string
}

func main() {
	o := options{}
	flag.IntVar(&o.n, "n", envInt("BENCH_N", 20), "objects in the scale phase (BENCH_N)")
	flag.IntVar(&o.samples, "samples", envInt("BENCH_SAMPLES", 5), "samples of one object and of the raw engine (BENCH_SAMPLES)")
	flag.DurationVar(&o.idle, "idle", 30*time.Second, "idle window after convergence")
	flag.DurationVar(&o.restartWindow, "restart-window", time.Minute, "window after the controller's restart")
	flag.StringVar(&o.outMD, "out-md", "docs/benchmarks.md", "markdown report")
	flag.StringVar(&o.outJSON, "out-json", "docs/benchmarks.json", "JSON report")
	flag.StringVar(&o.controller, "controller", "bin/landform-controller", "landform-controller binary")
	flag.StringVar(&o.runner, "runner", "bin/landform-runner", "landform-runner binary")
	flag.StringVar(&o.tofu, "tofu", "bin/tofu", "OpenTofu binary, for Landform's runners and the raw engine")
	flag.StringVar(&o.revision, "revision", "", "what was measured, for the report (default: git describe --always --dirty)")
	flag.StringVar(&o.keep, "keep", "", "keep the work directory (logs, controller work dir) here instead of removing it")
	renderFrom := flag.String("render", "", "only render this JSON report again as -out-md (after a change to the report's text)")
	flag.Parse()
	if *renderFrom != "" {
		if err := render(*renderFrom, o.outMD); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
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
	art        *artifactServer
	tr         *tracker
	ctrl       *controller
}

func run(o options) error {
	for _, p := range []*string{&o.controller, &o.runner, &o.tofu} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("%s is missing: run `make tools build` (%w)", abs, err)
		}
		*p = abs
	}
	if o.revision == "" {
		out, _ := exec.Command("git", "describe", "--always", "--dirty").Output()
		o.revision = "`" + strings.TrimSpace(string(out)) + "`"
	}
	tmp, err := os.MkdirTemp("", "landform-bench-")
	if err != nil {
		return err
	}
	if o.keep != "" {
		tmp = o.keep
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return err
		}
	} else {
		defer os.RemoveAll(tmp)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	b := &bench{o: o, tmp: tmp, tr: newTracker()}
	r := &Report{Date: time.Now().UTC().Format(time.RFC3339), Revision: o.revision}
	r.Machine.CPUModel, r.Machine.MemoryGiB = cpuInfo()
	r.Machine.Cores = runtime.NumCPU()
	r.Machine.Kernel = readTrim("/proc/sys/kernel/osrelease")
	r.Machine.Go = runtime.Version()
	r.Machine.LoadStart = loadAvg()
	version := exec.Command(o.tofu, "version")
	version.Env = append(cleanEnv(), "CHECKPOINT_DISABLE=1")
	ver, _ := version.Output()
	r.Machine.Engine, _, _ = strings.Cut(string(ver), "\n")
	r.Config = Config{N: o.n, Samples: o.samples, Concurrent: concurrent, ConcurrentRuns: concurrentRuns,
		IdleWindowS: o.idle.Seconds(), RestartWindowS: o.restartWindow.Seconds(), Interval: interval.String()}

	log("starting kube-apiserver and etcd")
	if b.env, err = testenv.Start(); err != nil {
		return err
	}
	defer func() { _ = b.env.Stop() }()
	if b.c, err = client.NewWithWatch(b.env.Config, client.Options{Scheme: b.env.Scheme}); err != nil {
		return err
	}
	if b.kube, err = kubernetes.NewForConfig(b.env.Config); err != nil {
		return err
	}
	b.kubeconfig = filepath.Join(tmp, "kubeconfig")
	if err := placement.WriteKubeconfig(b.env.Config, b.kubeconfig); err != nil {
		return err
	}
	if b.apiPID, err = childByName(os.Getpid(), "kube-apiserver"); err != nil {
		return err
	}
	if b.etcdPID, err = childByName(os.Getpid(), "etcd"); err != nil {
		return err
	}
	b.art = newArtifactServer(filepath.Join(tmp, "artifacts"))
	defer b.art.srv.Close()
	b.tr.start(ctx, b.c)

	for _, ns := range []string{"bench-raw", "bench-one", "bench-scale"} {
		if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	revOne, err := b.publish(ctx, "bench-one", "# bench-one\n")
	if err != nil {
		return err
	}
	revScale, err := b.publish(ctx, "bench-scale", "# bench-scale\n")
	if err != nil {
		return err
	}

	work := filepath.Join(tmp, "controller")
	if b.ctrl, err = b.startController(ctx, work, "controller-1.log"); err != nil {
		return err
	}
	defer func() { b.ctrl.stop() }()

	if err := b.overhead(ctx, r, revOne); err != nil {
		return fmt.Errorf("overhead: %w", err)
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
	r.Machine.LoadEnd = loadAvg()
	r.Targets = r.targets()
	return writeReports(r, o.outMD, o.outJSON)
}

func writeReports(r *Report, md, js string) error {
	var jb, mb bytes.Buffer
	if err := r.writeJSON(&jb); err != nil {
		return err
	}
	if err := r.writeMarkdown(&mb); err != nil {
		return err
	}
	if err := os.WriteFile(js, jb.Bytes(), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(md, mb.Bytes(), 0o644); err != nil {
		return err
	}
	log("wrote %s and %s", md, js)
	return nil
}

// render writes the markdown report of a JSON report.
func render(from, md string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: %w", from, err)
	}
	var mb bytes.Buffer
	if err := r.writeMarkdown(&mb); err != nil {
		return err
	}
	return os.WriteFile(md, mb.Bytes(), 0o644)
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

// overhead alternates the raw engine and one Landform object.
func (b *bench) overhead(ctx context.Context, r *Report, rev string) error {
	var rawCPU, rawEngine, rawWrites, lfCPU []float64
	for i := 0; i < b.o.samples; i++ {
		before, err := b.snap(ctx)
		if err != nil {
			return err
		}
		secs, engine, err := b.raw(i)
		if err != nil {
			return err
		}
		after, err := b.snap(ctx)
		if err != nil {
			return err
		}
		d := after.sub(before)
		r.Overhead.RawSeconds = append(r.Overhead.RawSeconds, secs)
		rawEngine = append(rawEngine, engine)
		rawCPU = append(rawCPU, engine+d.cpu.APIServer+d.cpu.Etcd)
		rawWrites = append(rawWrites, float64(sum(d.writes)))

		before = after
		name := fmt.Sprintf("one-%d", i)
		start := time.Now()
		if err := b.createTerraform(ctx, "bench-one", name); err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		done, err := b.tr.wait(wctx, []string{"bench-one/" + name}, rev)
		cancel()
		if err != nil {
			return fmt.Errorf("%s did not become Ready with its outputs: %w (see %s)", name, err, b.ctrl.logPath)
		}
		after, err = b.snap(ctx)
		if err != nil {
			return err
		}
		d = after.sub(before)
		r.Overhead.LandformSeconds = append(r.Overhead.LandformSeconds, done["bench-one/"+name].Sub(start).Seconds())
		lfCPU = append(lfCPU, d.cpu.Total())
		log("overhead sample %d: raw %.2fs, landform %.2fs", i, secs, r.Overhead.LandformSeconds[i])
	}
	o := &r.Overhead
	o.RawMedian, o.LandformMedian = median(o.RawSeconds), median(o.LandformSeconds)
	o.Ratio = ratio(o.LandformMedian, o.RawMedian)
	o.RawCPUPerRun, o.RawEngineCPUPerRun, o.RawAPIWritesPerRun = median(rawCPU), median(rawEngine), median(rawWrites)
	o.LandformCPUPerObj = median(lfCPU)
	return nil
}

// raw runs the engine by hand on the module with the kubernetes backend in
// a fresh directory, and returns its wall time and CPU (its processes and
// their reaped children: providers, if any).
func (b *bench) raw(i int) (secs, cpu float64, err error) {
	dir := filepath.Join(b.tmp, fmt.Sprintf("raw-%d", i))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, 0, err
	}
	backend := fmt.Sprintf("terraform {\n  backend \"kubernetes\" {\n    secret_suffix = %q\n    namespace     = \"bench-raw\"\n    config_path   = %q\n  }\n}\n",
		fmt.Sprintf("raw-%d", i), b.kubeconfig)
	for name, body := range map[string]string{"main.tf": module, "backend.tf": backend, "cli.tfrc": ""} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
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
		cmd := exec.Command(b.o.tofu, args...)
		cmd.Dir = dir
		cmd.Env = append(cleanEnv(), "TF_CLI_CONFIG_FILE="+filepath.Join(dir, "cli.tfrc"), "TF_IN_AUTOMATION=1", "HOME="+dir, "CHECKPOINT_DISABLE=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return 0, 0, fmt.Errorf("tofu %s: %w\n%s", args[0], err, out)
		}
		cpu += cmd.ProcessState.UserTime().Seconds() + cmd.ProcessState.SystemTime().Seconds()
	}
	return time.Since(start).Seconds(), cpu, nil
}

// cleanEnv is the environment without the machine's Terraform settings.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "TF_CLI_CONFIG_FILE=") || strings.HasPrefix(kv, "TF_IN_AUTOMATION=") || strings.HasPrefix(kv, "KUBECONFIG=") {
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
	created := map[string]time.Time{}
	var keys []string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("obj-%04d", i)
		created["bench-scale/"+name] = time.Now()
		if err := b.createTerraform(ctx, "bench-scale", name); err != nil {
			return err
		}
		keys = append(keys, "bench-scale/"+name)
	}
	log("created %d objects", n)
	wctx, cancel := context.WithTimeout(ctx, time.Duration(n)*30*time.Second+5*time.Minute)
	done, err := b.tr.wait(wctx, keys, rev)
	cancel()
	if err != nil {
		return fmt.Errorf("%d of %d objects done: %w (see %s)", len(done), n, err, b.ctrl.logPath)
	}
	after, err := b.snap(ctx)
	if err != nil {
		return err
	}
	d := after.sub(before)
	var lat []float64
	var last time.Time
	for k, at := range done {
		lat = append(lat, at.Sub(created[k]).Seconds())
		if at.After(last) {
			last = at
		}
	}
	s := &r.Scale
	s.N = n
	s.AllReadySeconds = last.Sub(start).Seconds()
	s.P50Seconds, s.P95Seconds, s.MaxSeconds = percentile(lat, 50), percentile(lat, 95), percentile(lat, 100)
	s.CPU = d.cpu
	s.CPUPerObject = d.cpu.Total() / float64(n)
	s.CPUBound = d.cpu.Total() / float64(r.Machine.Cores)
	s.ControllerPeakMiB = peakRSSMiB(b.ctrl.pid())
	runs := b.tr.runsSince(start)
	s.RunsStarted = len(runs)
	s.RunsByAction = map[string]int{}
	for _, run := range runs {
		s.RunsByAction[run.action]++
	}
	s.ArtifactDownloads = d.downloads
	s.APIWritesByRes = d.writes
	s.APIWritesByRes["terraforms"] -= n // the harness's own creates
	s.APIWrites = sum(s.APIWritesByRes)
	s.APIWritesPerObject = float64(s.APIWrites) / float64(n)
	r.Machine.OthersCPUs = d.busy - d.cpu.Total() - d.harness
	log("scale: %d objects all done in %.1fs (p50 %.1fs, p95 %.1fs), %.1f CPU-s", n, s.AllReadySeconds, s.P50Seconds, s.P95Seconds, d.cpu.Total())
	return nil
}

// newRevision publishes a new artifact for the scale GitRepository and
// waits until every object has applied it.
func (b *bench) newRevision(ctx context.Context, r *Report) error {
	before, err := b.snap(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	rev, err := b.publish(ctx, "bench-scale", "# bench-scale, revision 2\n")
	if err != nil {
		return err
	}
	var keys []string
	for i := 0; i < b.o.n; i++ {
		keys = append(keys, fmt.Sprintf("bench-scale/obj-%04d", i))
	}
	wctx, cancel := context.WithTimeout(ctx, time.Duration(b.o.n)*30*time.Second+5*time.Minute)
	done, err := b.tr.wait(wctx, keys, rev)
	cancel()
	if err != nil {
		return fmt.Errorf("%d of %d objects applied the new revision: %w (see %s)", len(done), b.o.n, err, b.ctrl.logPath)
	}
	after, err := b.snap(ctx)
	if err != nil {
		return err
	}
	d := after.sub(before)
	var lat []float64
	var last time.Time
	for _, at := range done {
		lat = append(lat, at.Sub(start).Seconds())
		if at.After(last) {
			last = at
		}
	}
	n := &r.NewRev
	n.AllReadySeconds = last.Sub(start).Seconds()
	n.P50Seconds, n.P95Seconds = percentile(lat, 50), percentile(lat, 95)
	n.CPU = d.cpu
	n.RunsStarted = len(b.tr.runsSince(start))
	n.ArtifactDownloads = d.downloads
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
	if b.ctrl, err = b.startController(ctx, work, "controller-2.log"); err != nil {
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
		ControllerPeakMiB: peakRSSMiB(b.ctrl.pid()),
	}
	return nil
}

func (b *bench) createTerraform(ctx context.Context, ns, name string) error {
	return b.c.Create(ctx, &infrav1.Terraform{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: infrav1.TerraformSpec{
			SourceRef:            infrav1.SourceReference{Kind: sourcev1.GitRepositoryKind, Name: "repo"},
			Path:                 "./",
			Interval:             metav1.Duration{Duration: interval},
			ApprovePlan:          infrav1.ApprovePlanAuto,
			WriteOutputsToSecret: &infrav1.WriteOutputsToSecretSpec{Name: name + "-outputs"},
		},
	})
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
}

func (b *bench) snap(ctx context.Context) (snapshot, error) {
	raw, err := b.kube.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return snapshot{}, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	s := snapshot{at: time.Now(), writes: apiWrites(string(raw)), downloads: b.art.count(), busy: machineBusy()}
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
		if b.ctrl != nil && p.pid == b.ctrl.pid() && !b.ctrl.exited() {
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
}

func (s snapshot) sub(before snapshot) delta {
	d := delta{
		cpu:       CPU{APIServer: s.api - before.api, Etcd: s.etcd - before.etcd},
		busy:      s.busy - before.busy,
		harness:   s.harness - before.harness,
		writes:    diff(before.writes, s.writes),
		downloads: s.downloads - before.downloads,
	}
	if s.ctrlPID == before.ctrlPID {
		d.cpu.Controller, d.cpu.Runners = s.ctrlSelf-before.ctrlSelf, s.ctrlKids-before.ctrlKids
	} else { // a new controller: everything it did is in the window
		d.cpu.Controller, d.cpu.Runners = s.ctrlSelf, s.ctrlKids
	}
	return d
}

// controller is bin/landform-controller as a child process.
type controller struct {
	cmd     *exec.Cmd
	done    chan struct{}
	logPath string
}

func (c *controller) pid() int { return c.cmd.Process.Pid }

func (c *controller) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits (SIGKILL after a minute).
func (c *controller) stop() {
	if c.exited() {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(time.Minute):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

func (b *bench) startController(ctx context.Context, work, logName string) (*controller, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	logPath := filepath.Join(b.tmp, logName)
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(b.o.controller,
		"--runner=local", "--engine", b.o.tofu, "--runner-binary", b.o.runner, "--work-dir", work,
		"--kubeconfig", b.kubeconfig, "--metrics-addr", addr, "--health-addr=0",
		"--concurrent="+strconv.Itoa(concurrent), "--concurrent-runs="+strconv.Itoa(concurrentRuns), "--drain-timeout=1m")
	cmd.Env = append(cleanEnv(), "CHECKPOINT_DISABLE=1")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	c := &controller{cmd: cmd, done: make(chan struct{}), logPath: logPath}
	go func() { _ = cmd.Wait(); logFile.Close(); close(c.done) }()
	// Up once it serves metrics: the manager has started.
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			resp.Body.Close()
			return c, nil
		}
		if c.exited() || time.Now().After(deadline) || ctx.Err() != nil {
			c.stop()
			return nil, fmt.Errorf("the controller did not start: see %s", logPath)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// artifactServer serves tarballs as source-controller does and counts the
// downloads.
type artifactServer struct {
	dir string
	srv *httptest.Server
	mu  sync.Mutex
	n   int
	gen map[string]int
}

func newArtifactServer(dir string) *artifactServer {
	_ = os.MkdirAll(dir, 0o755)
	a := &artifactServer{dir: dir, gen: map[string]int{}}
	files := http.FileServer(http.Dir(dir))
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			a.mu.Lock()
			a.n++
			a.mu.Unlock()
		}
		files.ServeHTTP(w, r)
	}))
	return a
}

func (a *artifactServer) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

// publish packs the module (with extra appended, so that each namespace
// and revision has its own digest) as ns's GitRepository "repo"'s artifact,
// creating the GitRepository the first time, and returns the revision.
func (b *bench) publish(ctx context.Context, ns, extra string) (string, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	body := module + extra
	if err := tw.WriteHeader(&tar.Header{Name: "main.tf", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		return "", err
	}
	_, _ = tw.Write([]byte(body))
	if err := errors.Join(tw.Close(), gz.Close()); err != nil {
		return "", err
	}
	sum := sha256.Sum256(buf.Bytes())
	a := b.art
	a.mu.Lock()
	a.gen[ns]++
	name := fmt.Sprintf("%s-%d.tar.gz", ns, a.gen[ns])
	a.mu.Unlock()
	if err := os.WriteFile(filepath.Join(a.dir, name), buf.Bytes(), 0o644); err != nil {
		return "", err
	}
	repo := &sourcev1.GitRepository{}
	key := client.ObjectKey{Namespace: ns, Name: "repo"}
	if err := b.c.Get(ctx, key, repo); err != nil {
		repo = &sourcev1.GitRepository{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "repo"},
			Spec:       sourcev1.GitRepositorySpec{URL: "https://example.invalid/repo.git", Interval: metav1.Duration{Duration: time.Hour}},
		}
		if err := b.c.Create(ctx, repo); err != nil {
			return "", err
		}
	}
	size := int64(buf.Len())
	rev := "main@sha1:" + hex.EncodeToString(sum[:20])
	repo.Status.Artifact = &meta.Artifact{
		Path: name, URL: a.srv.URL + "/" + name,
		Revision:       rev,
		Digest:         "sha256:" + hex.EncodeToString(sum[:]),
		LastUpdateTime: metav1.Now(),
		Size:           &size,
	}
	repo.Status.ObservedGeneration = repo.Generation
	conditions.MarkTrue(repo, meta.ReadyCondition, meta.SucceededReason, "stored artifact for revision %s", rev)
	return rev, b.c.Status().Update(ctx, repo)
}
