package main

// `make bench-cluster`: the bench on the real single-node cluster of `make
// cluster-up`, with Landform installed by its chart (runner Pods), beside
// the raw engine in a Pod of the same runner image on the same node. See
// docs/benchmarks.md's section on it for the method; the report is
// cluster_report.go.

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/devenv/gitserver"
	"github.com/landform-dev/landform/internal/testenv"
)

// clusterOptions are the flags of the cluster mode.
type clusterOptions struct {
	// dir is the cluster's state (e2e/cluster/lib.sh's dir): PID files,
	// the admin kubeconfig, platform.env.
	dir          string
	ns           string
	controllerNS string
	n            int
	// containerd is the cluster's containerd socket, which names its shims.
	containerd string
	cgroupRoot string
	// idle is the window measured before the samples, with nothing to do.
	idle time.Duration
	// peer, when set, is the controller measured beside Landform at n
	// objects instead of the usual run (cluster_peer.go).
	peer peerOptions
}

// The raw engine's Pod: the runner image's shell runs tofu on the module
// from a ConfigMap, printing a marker line after each step; containerd
// timestamps each line of the log. The engine's output is shown only when
// it fails.
const (
	rawModuleConfigMap = "bench-raw-module"
	rawContainer       = "engine"
	rawSampleLabel     = "bench.landform.dev/raw"
	rawScript          = `set -e
echo start
cp /module/main.tf /work/
cd /work
tofu init -input=false -no-color >/tmp/init.log 2>&1 || { cat /tmp/init.log; exit 1; }
echo init-done
tofu apply -auto-approve -input=false -no-color >/tmp/apply.log 2>&1 || { cat /tmp/apply.log; exit 1; }
echo apply-done
`
	// The bench's GitRepository, and the git server's repository it
	// clones.
	benchRepo = "bench"
)

// clusterBench is the running cluster bench.
type clusterBench struct {
	o     options
	co    clusterOptions
	c     client.WithWatch
	kube  *kubernetes.Clientset
	tr    *tracker
	tl    *timeline
	shims *shimMeter
	// tok makes this run's object names its own: no state of an earlier
	// run can be found under them.
	tok         string
	rev         string // the GitRepository's artifact revision
	hostPIDs    map[string]int
	ctrl        clusterController
	bestEffort  string // the BestEffort Pods' cgroup
	runnerImage string
	// peer is the controller measured instead of Landform (nil: Landform).
	peer *peerOptions
}

// clusterController is the chart's controller Pod, as measured.
type clusterController struct {
	pod        *corev1.Pod
	cgroup     string
	metricsURL string
	args       []string
	restarts   int32
	container  string // the controller's container: manager, or the peer's
}

func runCluster(o options, co clusterOptions) error {
	if o.revision == "" {
		o.revision = gitRevision()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kubeconfig := filepath.Join(co.dir, "admin.kubeconfig")
	inst, err := testenv.ConnectInstallation(ctx, kubeconfig, co.controllerNS, co.ns, time.Minute, time.Second)
	if err != nil {
		return fmt.Errorf("%w (make bench-cluster installs Landform with runner namespace %s)", err, co.ns)
	}
	cb := &clusterBench{o: o, co: co, tr: newTracker(), tl: newTimeline(co.ns), hostPIDs: map[string]int{},
		tok: strconv.FormatInt(time.Now().Unix()%(36*36*36*36), 36)}
	// client-go's default of 5 requests a second would have the harness
	// create 50 objects over 8 s: the API server sets the pace, as in
	// `make bench`.
	cfg := rest.CopyConfig(inst.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	if cb.c, err = client.NewWithWatch(cfg, client.Options{Scheme: inst.Client.Scheme()}); err != nil {
		return err
	}
	if cb.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	for _, name := range hostComponents {
		if cb.hostPIDs[name], err = pidOf(filepath.Join(co.dir, "pids"), name); err != nil {
			return err
		}
	}
	if cb.bestEffort, err = bestEffortCgroup(co.cgroupRoot); err != nil {
		return err
	}
	if err := cb.findController(ctx); err != nil {
		return err
	}
	r := &ClusterReport{Date: time.Now().UTC().Format(time.RFC3339), Revision: o.revision,
		Config: ClusterConfig{N: co.n, Samples: o.samples, Namespace: co.ns, IdleWindowSeconds: co.idle.Seconds()}}
	r.Machine.CPUModel, r.Machine.MemoryGiB = cpuInfo()
	r.Machine.Cores = runtime.NumCPU()
	r.Machine.Kernel = readTrim("/proc/sys/kernel/osrelease")
	r.Machine.Go = runtime.Version()
	r.Machine.LoadStart = loadAvg()
	if tofu, err := testenv.Tool("tofu-static", ""); err == nil {
		version := exec.Command(tofu, "version")
		version.Env = append(cleanEnv(), "CHECKPOINT_DISABLE=1")
		ver, _ := version.Output()
		r.Machine.Engine, _, _ = strings.Cut(string(ver), "\n")
		r.Machine.Engine += " (`bin/tofu-static`, the runner image's)"
	}
	if err := cb.describe(ctx, &r.Cluster); err != nil {
		return err
	}

	cb.shims = newShimMeter(co.containerd)
	cb.shims.start()
	defer cb.shims.stop()
	cb.tr.start(ctx, cb.c, co.ns)
	cb.tl.start(ctx, cb.c)
	if co.peer.name != "" {
		return cb.compare(ctx, r)
	}

	switch o.only {
	case "":
	case "writes":
		return cb.writesOnly(ctx, r)
	default:
		return fmt.Errorf("-only (BENCH_ONLY) %q: with -cluster, the measurement that runs alone is writes", o.only)
	}
	if _, err := os.Stat(cb.clusterAuditLog()); err == nil {
		log("the cluster keeps an audit log (LANDFORM_CLUSTER_AUDIT=1): the API server's CPU figures include its cost")
	}

	log("cleaning up what an earlier run left in %s", co.ns)
	if err := cb.cleanup(ctx); err != nil {
		return err
	}
	if err := cb.prepare(ctx); err != nil {
		return err
	}
	if err := cb.idle(ctx, &r.Idle); err != nil {
		return fmt.Errorf("idle: %w", err)
	}
	if err := cb.one(ctx, &r.One); err != nil {
		return fmt.Errorf("one object: %w", err)
	}
	if err := cb.cleanup(ctx); err != nil {
		return err
	}
	if co.n > 0 {
		if err := cb.scale(ctx, r); err != nil {
			return fmt.Errorf("%d objects: %w", co.n, err)
		}
		if err := cb.cleanup(ctx); err != nil {
			return err
		}
	}
	if err := cb.checkController(ctx); err != nil {
		return err
	}
	path := clusterReportPath(o.outJSON)
	carryAuditedWrites(r, path)
	targets, err := endRun(&r.Machine, r.targets, o.notes)
	if err != nil {
		return err
	}
	r.Targets = targets
	carryWritesBefore(r, path)
	if err := writeReportFile(path, r); err != nil {
		return err
	}
	log("wrote %s", path)
	return render(o.outJSON, o.outMD, o.notes, false)
}

// clusterReportPath is where the cluster run is kept beside the default
// run's report main: docs/benchmarks-cluster.json.
func clusterReportPath(main string) string {
	return strings.TrimSuffix(main, ".json") + "-cluster.json"
}

// findController finds the chart's controller Pod, its container's
// cgroup, its metrics address and its flags.
func (cb *clusterBench) findController(ctx context.Context) error {
	pod, err := cb.deploymentPod(ctx, cb.co.controllerNS, "landform-controller")
	if err != nil {
		return err
	}
	ctr, status := containerOf(pod, "manager")
	if ctr == nil || status == nil {
		return fmt.Errorf("controller Pod %s has no manager container running", pod.Name)
	}
	args := controllerFlags(ctr.Args)
	if args["runner"] != "pod" {
		return fmt.Errorf("the controller runs --runner=%q: the cluster bench measures runner Pods", args["runner"])
	}
	if args["runner-image"] == "" {
		return fmt.Errorf("the controller has no --runner-image")
	}
	port := strings.TrimPrefix(args["metrics-addr"], ":")
	if port == "" || strings.Contains(port, ":") {
		return fmt.Errorf("the controller's --metrics-addr=%q is not :<port>", args["metrics-addr"])
	}
	cgroup, err := containerCgroup(cb.co.cgroupRoot, string(pod.UID), status.ContainerID)
	if err != nil {
		return err
	}
	cb.ctrl = clusterController{pod: pod, cgroup: cgroup, metricsURL: "http://" + pod.Status.PodIP + ":" + port + "/metrics",
		args: ctr.Args, restarts: status.RestartCount, container: ctr.Name}
	cb.runnerImage = args["runner-image"]
	if _, _, err := runnerStarts(cb.ctrl.metricsURL, "pod"); err != nil {
		return fmt.Errorf("reading the controller's metrics at %s: %w", cb.ctrl.metricsURL, err)
	}
	return nil
}

// deploymentPod is the one running Pod of Deployment ns/name: a
// controller as its chart installs it.
func (cb *clusterBench) deploymentPod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	var dep appsv1.Deployment
	if err := cb.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &dep); err != nil {
		return nil, fmt.Errorf("the chart's Deployment %s/%s: %w", ns, name, err)
	}
	var pods corev1.PodList
	if err := cb.c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(dep.Spec.Selector.MatchLabels)); err != nil {
		return nil, err
	}
	var pod *corev1.Pod
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			if pod != nil {
				return nil, fmt.Errorf("more than one Pod of %s runs in %s (a rollout?): measure one", name, ns)
			}
			pod = p
		}
	}
	if pod == nil {
		return nil, fmt.Errorf("no Pod of %s runs in %s", name, ns)
	}
	return pod, nil
}

// containerOf is the Pod's container name and its status; nil for
// either that the Pod does not have.
func containerOf(pod *corev1.Pod, name string) (*corev1.Container, *corev1.ContainerStatus) {
	var ctr *corev1.Container
	var status *corev1.ContainerStatus
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			ctr = &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			status = &pod.Status.ContainerStatuses[i]
		}
	}
	return ctr, status
}

// checkController fails when the controller measured was replaced or
// restarted during the run: its figures would be of two processes.
func (cb *clusterBench) checkController(ctx context.Context) error {
	var pod corev1.Pod
	if err := cb.c.Get(ctx, client.ObjectKeyFromObject(cb.ctrl.pod), &pod); err != nil {
		return fmt.Errorf("the controller Pod measured, %s: %w", cb.ctrl.pod.Name, err)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == cb.ctrl.container && cs.RestartCount != cb.ctrl.restarts {
			return fmt.Errorf("the controller restarted during the run (restart count %d, was %d)", cs.RestartCount, cb.ctrl.restarts)
		}
	}
	return nil
}

// controllerFlags parses --name=value arguments (a bare --name is "true").
func controllerFlags(args []string) map[string]string {
	out := map[string]string{}
	for _, a := range args {
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			continue
		}
		k, v, hasValue := strings.Cut(name, "=")
		if !hasValue {
			v = "true"
		}
		out[k] = v
	}
	return out
}

// describe fills in what was measured: the node, the images, the
// controller's flags.
func (cb *clusterBench) describe(ctx context.Context, s *ClusterSetup) error {
	var nodes corev1.NodeList
	if err := cb.c.List(ctx, &nodes); err != nil {
		return err
	}
	if len(nodes.Items) != 1 {
		return fmt.Errorf("want the one node of `make cluster-up`, found %d", len(nodes.Items))
	}
	n := nodes.Items[0]
	s.Node, s.Kubelet, s.Runtime = n.Name, n.Status.NodeInfo.KubeletVersion, n.Status.NodeInfo.ContainerRuntimeVersion
	for _, cs := range cb.ctrl.pod.Status.ContainerStatuses {
		if cs.Name == "manager" {
			s.ControllerImage = cs.Image + " (" + cs.ImageID + ")"
		}
	}
	s.RunnerImage = cb.runnerImage
	head, err := cb.kube.CoreV1().Pods(cb.ctrl.pod.Namespace).GetLogs(cb.ctrl.pod.Name, &corev1.PodLogOptions{Container: "manager", LimitBytes: ptr.To(int64(16 << 10))}).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("the controller's log: %w", err)
	}
	s.ControllerVersion = startedVersion(string(head))
	s.ControllerArgs = cb.ctrl.args
	return nil
}

// prepare publishes the module: a repository of the platform's git
// server that the real source-controller clones for GitRepository bench,
// and the ConfigMap the raw engine's Pods read it from.
func (cb *clusterBench) prepare(ctx context.Context) error {
	env, err := readEnvFile(filepath.Join(cb.co.dir, "platform.env"))
	if err != nil {
		return fmt.Errorf("the platform's addresses (e2e/cluster/platform.sh writes them): %w", err)
	}
	gitRoot, gitURL := env["LANDFORM_CLUSTER_GIT_ROOT"], env["LANDFORM_CLUSTER_GIT_URL"]
	if gitRoot == "" || gitURL == "" {
		return fmt.Errorf("platform.env names no git server: run e2e/cluster/platform.sh")
	}
	repoName := "bench-" + cb.co.ns
	dir, err := os.MkdirTemp("", "landform-bench-module-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(module), 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(gitRoot, repoName+".git")); err != nil {
		return err
	}
	if err := gitserver.Seed(gitRoot, repoName, dir); err != nil {
		return err
	}
	repo := &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Namespace: cb.co.ns, Name: benchRepo}}
	if err := testenv.DeleteAndWait(ctx, cb.c, repo, time.Minute, 200*time.Millisecond); err != nil {
		return err
	}
	repo.Spec = sourcev1.GitRepositorySpec{URL: gitURL + "/" + repoName + ".git", Interval: metav1.Duration{Duration: time.Hour},
		Reference: &sourcev1.GitRepositoryRef{Branch: "main"}}
	if err := cb.c.Create(ctx, repo); err != nil {
		return err
	}
	if _, err := testenv.WaitFor(ctx, cb.c, repo, 2*time.Minute, 200*time.Millisecond, "GitRepository bench to have an artifact (source-controller)",
		func(g *sourcev1.GitRepository) bool {
			c := apimeta.FindStatusCondition(g.Status.Conditions, meta.ReadyCondition)
			return g.Status.Artifact != nil && c != nil && c.Status == metav1.ConditionTrue
		}); err != nil {
		return err
	}
	if err := cb.c.Get(ctx, client.ObjectKeyFromObject(repo), repo); err != nil {
		return err
	}
	cb.rev = repo.Status.Artifact.Revision

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cb.co.ns, Name: rawModuleConfigMap}}
	if err := cb.c.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
		return err
	}
	cm.Data = map[string]string{"main.tf": module, "backend.tf": cb.rawStateBackend()}
	if err := cb.c.Create(ctx, cm); err != nil {
		return err
	}
	return cb.rawStateIdentity(ctx)
}

// readEnvFile reads KEY=VALUE lines.
func readEnvFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(k, "#") {
			out[k] = v
		}
	}
	return out, nil
}

// cleanup deletes the bench's Terraform objects (deletionPolicy Orphan:
// nothing to destroy) and what they leave (their state, outputs, plans,
// logs, state identities, locks) and raw engine Pods, and waits until the
// namespace has no Pod.
func (cb *clusterBench) cleanup(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var tfs infrav1.TerraformList
	if err := cb.c.List(ctx, &tfs, client.InNamespace(cb.co.ns)); err != nil {
		return err
	}
	for i := range tfs.Items {
		tf := &tfs.Items[i]
		if tf.Spec.DeletionPolicy != infrav1.DeletionPolicyOrphan {
			// Not the bench's (or an old one): destroying its resources
			// is someone's decision, not the bench's.
			return fmt.Errorf("namespace %s holds Terraform %s, which the bench did not create: use a namespace of the bench's own", cb.co.ns, tf.Name)
		}
		if err := cb.c.Delete(ctx, tf); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	if err := testenv.Poll(ctx, 5*time.Minute, 200*time.Millisecond, "the bench's Terraform objects to go", func() (bool, string, error) {
		var left infrav1.TerraformList
		if err := cb.c.List(ctx, &left, client.InNamespace(cb.co.ns)); err != nil {
			return false, "", err
		}
		return len(left.Items) == 0, fmt.Sprintf("%d left", len(left.Items)), nil
	}); err != nil {
		return err
	}
	ns := client.InNamespace(cb.co.ns)
	owned := client.HasLabels{infrav1.OwnerNameLabel}
	state := client.MatchingLabels{"tfstate": "true"}
	for _, del := range []struct {
		obj  client.Object
		opts []client.DeleteAllOfOption
	}{
		{&corev1.Pod{}, []client.DeleteAllOfOption{ns, client.HasLabels{rawSampleLabel}}},
		{&corev1.Secret{}, []client.DeleteAllOfOption{ns, owned}},
		{&corev1.Secret{}, []client.DeleteAllOfOption{ns, state}},
		{&coordinationv1.Lease{}, []client.DeleteAllOfOption{ns, state}},
		{&corev1.ServiceAccount{}, []client.DeleteAllOfOption{ns, owned}},
		{&rbacv1.Role{}, []client.DeleteAllOfOption{ns, owned}},
		{&rbacv1.RoleBinding{}, []client.DeleteAllOfOption{ns, owned}},
	} {
		if err := cb.c.DeleteAllOf(ctx, del.obj, del.opts...); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the bench's %T: %w", del.obj, err)
		}
	}
	return cb.tl.waitNoPods(ctx)
}

// settle waits until the namespace has no Pod (the last sample's is torn
// down) but those kept for reuse (waitIdle), then a second, so that
// samples do not overlap.
func (cb *clusterBench) settle(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := cb.waitIdle(wctx); err != nil {
		return err
	}
	time.Sleep(time.Second)
	return nil
}

// clusterSnap is the counters at one moment.
type clusterSnap struct {
	at            time.Time
	cpu           ClusterCPU
	busy, harness float64
	writes        map[string]int
}

// snap reads the counters. The API server's metrics, whose reading costs
// the API server CPU, are read before the CPU counters at the start of a
// window (first) and after them at its end, so that their cost falls
// outside it.
func (cb *clusterBench) snap(ctx context.Context, first bool) (clusterSnap, error) {
	var s clusterSnap
	readWrites := func() error {
		raw, err := cb.kube.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("reading the API server's metrics: %w", err)
		}
		s.writes = apiWrites(string(raw))
		return nil
	}
	if first {
		if err := readWrites(); err != nil {
			return s, err
		}
	}
	s.at = time.Now()
	var err error
	if s.cpu.Controller, err = cgroupUsage(cb.ctrl.cgroup); err != nil {
		return s, fmt.Errorf("the controller's cgroup (was its Pod replaced?): %w", err)
	}
	if s.cpu.Pods, err = cgroupUsage(cb.bestEffort); err != nil {
		return s, err
	}
	for name, pid := range cb.hostPIDs {
		p, err := readProcStat(pid)
		if err != nil {
			return s, fmt.Errorf("%s (pid %d) stopped during the run: %w", name, pid, err)
		}
		cpu := p.self + p.children
		switch name {
		case "kubelet":
			s.cpu.Kubelet = cpu
		case "containerd":
			s.cpu.Containerd = cpu
		case "kube-apiserver":
			s.cpu.APIServer = cpu
		case "etcd":
			s.cpu.Etcd = cpu
		case "kube-scheduler":
			s.cpu.Scheduler = cpu
		case "kube-controller-manager":
			s.cpu.ControllerManager = cpu
		}
	}
	s.cpu.Shims = cb.shims.total()
	s.busy = machineBusy()
	if p, err := readProcStat(os.Getpid()); err == nil {
		s.harness = p.self + p.children
	}
	if !first {
		if err := readWrites(); err != nil {
			return s, err
		}
	}
	return s, nil
}

// window is what happened between two snapshots.
type window struct {
	seconds float64
	cpu     ClusterCPU
	busy    float64
	harness float64
	writes  map[string]int
}

// sub is what happened since before. The shims reap their containers'
// processes, so that the CPU of the Pods that ended is in the shims'
// reaped children too: less the Pods' cgroup, it is the shims' own and
// the runc processes they ran. That holds for a window that every Pod
// it measures starts and ends in, as each window here does.
func (s clusterSnap) sub(before clusterSnap) window {
	cpu := s.cpu.sub(before.cpu)
	cpu.Shims = max(0, cpu.Shims-cpu.Pods)
	return window{seconds: s.at.Sub(before.at).Seconds(), cpu: cpu, busy: s.busy - before.busy,
		harness: s.harness - before.harness, writes: diff(before.writes, s.writes)}
}

// idle measures the cluster with nothing to do: the floor under every
// other figure.
func (cb *clusterBench) idle(ctx context.Context, i *ClusterIdle) error {
	if err := cb.settle(ctx); err != nil {
		return err
	}
	log("idle for %s", cb.co.idle)
	before, err := cb.snap(ctx, true)
	if err != nil {
		return err
	}
	time.Sleep(cb.co.idle)
	after, err := cb.snap(ctx, false)
	if err != nil {
		return err
	}
	w := after.sub(before)
	i.WindowSeconds, i.CPU, i.APIWrites, i.APIWritesByRes = w.seconds, w.cpu, sum(w.writes), w.writes
	i.Others = w.busy - w.cpu.Total() - w.harness
	return nil
}

// one alternates the raw engine's Pod and one Landform object, samples
// times.
func (cb *clusterBench) one(ctx context.Context, o *ClusterOne) error {
	o.LoadStart = loadAvg()
	var raw, rawState, lf sampleSet
	var audited []auditedSample
	created0, _, _ := cb.tl.podCounts()
	for i := 0; i < cb.o.samples; i++ {
		rawName, stateName, lfName := fmt.Sprintf("raw-%s-%d", cb.tok, i), fmt.Sprintf("%s%s-%d", rawStatePrefix, cb.tok, i), fmt.Sprintf("one-%s-%d", cb.tok, i)
		r, err := raw.take(ctx, cb, cb.rawSample, rawName)
		if err != nil {
			return err
		}
		o.RawSeconds = append(o.RawSeconds, r.total)
		o.RawEngineSeconds = append(o.RawEngineSeconds, r.engineEnd)
		rs, err := rawState.take(ctx, cb, cb.rawStateSample, stateName)
		if err != nil {
			return err
		}
		o.RawStateSeconds = append(o.RawStateSeconds, rs.total)
		l, err := lf.take(ctx, cb, cb.landformSample, lfName)
		if err != nil {
			return err
		}
		audited = append(audited, auditedSample{writeSample{name: rawName, created: r.started, done: r.ended}, sampleRaw},
			auditedSample{writeSample{name: stateName, created: rs.started, done: rs.ended}, sampleRawState},
			auditedSample{writeSample{name: lfName, created: l.started, done: l.ended}, sampleLandform})
		o.LandformSeconds = append(o.LandformSeconds, l.total)
		o.RunnerStartSeconds = append(o.RunnerStartSeconds, l.runnerStart)
		log("one object, sample %d: raw Pod %.2fs (its engine done at %.2fs), raw Pod keeping its state %.2fs, Landform %.2fs", i, r.total, r.engineEnd, rs.total, l.total)
	}
	if o.PodReuse = cb.podReuse(); o.PodReuse != "" {
		created1, _, _ := cb.tl.podCounts()
		o.LandformPodsCreated = created1 - created0 - 2*cb.o.samples // less the raw engine's Pods
	}
	o.RawMedian, o.RawEngineMedian, o.LandformMedian = median(o.RawSeconds), median(o.RawEngineSeconds), median(o.LandformSeconds)
	o.Ratio = ratio(o.LandformMedian, o.RawMedian)
	o.ExtraSeconds = o.LandformMedian - o.RawMedian
	o.ExtraOverEngineSeconds = o.LandformMedian - o.RawEngineMedian
	o.RunnerStartMedian = median(o.RunnerStartSeconds)
	o.RawPhases = phaseStats(rawPhases, raw.times)
	o.LandformPhases = phaseStats(landformPhases, lf.times)
	o.RawCPU, o.LandformCPU = medianCPU(raw.cpu), medianCPU(lf.cpu)
	o.RawAPIWrites, o.LandformAPIWrites = median(raw.writes), median(lf.writes)
	o.RawAPIWritesByRes, o.LandformAPIWritesByRes = perObject(raw.byRes, cb.o.samples), perObject(lf.byRes, cb.o.samples)
	o.RawStateMedian = median(o.RawStateSeconds)
	o.RawStateCPU = ptr.To(medianCPU(rawState.cpu))
	o.RawStateAPIWrites = median(rawState.writes)
	o.RawStateAPIWritesByRes = perObject(rawState.byRes, cb.o.samples)
	var err error
	if _, err = os.Stat(cb.clusterAuditLog()); err == nil {
		if o.RawWrites, o.LandformWrites, err = auditedWrites(cb.clusterAuditLog(), cb.co.ns, audited, time.Now()); err != nil {
			log("every write by writer: not measured: %v", err)
		}
	}
	return nil
}

// sampleSet is one side's samples of one: the raw engine's Pods' or
// Landform's objects'.
type sampleSet struct {
	times  []sampleTimes
	cpu    []ClusterCPU
	writes []float64
	byRes  map[string]int
}

// take waits for the namespace to settle, then takes one sample and adds
// its timeline and counters to the set.
func (s *sampleSet) take(ctx context.Context, cb *clusterBench, sample func(context.Context, string) (measured, error), name string) (measured, error) {
	if err := cb.settle(ctx); err != nil {
		return measured{}, err
	}
	m, err := sample(ctx, name)
	if err != nil {
		return measured{}, err
	}
	s.times = append(s.times, m.times)
	s.cpu = append(s.cpu, m.w.cpu)
	s.writes = append(s.writes, float64(sum(m.w.writes)))
	if s.byRes == nil {
		s.byRes = map[string]int{}
	}
	addTo(s.byRes, m.w.writes)
	return m, nil
}

// addTo adds m's counts into into, dropping zeros.
func addTo(into, m map[string]int) {
	for k, v := range m {
		if v != 0 {
			into[k] += v
		}
	}
}

// measured is one sample: its total, its timeline and the counters
// over it (from its create until its Pod is gone).
type measured struct {
	total     float64
	engineEnd float64 // raw: create → the engine's last step done
	// runnerStart is the controller's landform_runner_start_seconds of
	// the sample's runner.
	runnerStart float64
	times       sampleTimes
	w           window
	// started and ended bound the sample: before its create, after its
	// Pod was gone.
	started, ended time.Time
}

// rawSample runs the raw engine in a Pod of the runner image: create →
// Succeeded.
func (cb *clusterBench) rawSample(ctx context.Context, name string) (measured, error) {
	return cb.podSample(ctx, cb.rawPod(name), "apply-done")
}

// podSample runs pod, one of the raw engine's, to its end: create →
// Succeeded; its engine ends at the log line last.
func (cb *clusterBench) podSample(ctx context.Context, pod *corev1.Pod, last string) (measured, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	before, err := cb.snap(ctx, true)
	if err != nil {
		return measured{}, err
	}
	name := pod.Name
	start := time.Now()
	if err := cb.c.Create(ctx, pod); err != nil {
		return measured{}, err
	}
	key := cb.co.ns + "/" + name
	end, err := cb.tl.waitAny(ctx, key, msSucceeded, msFailed)
	if err != nil {
		return measured{}, err
	}
	out, err := cb.kube.CoreV1().Pods(cb.co.ns).GetLogs(name, &corev1.PodLogOptions{Container: rawContainer, Timestamps: true}).DoRaw(ctx)
	if err != nil {
		return measured{}, fmt.Errorf("the log of the raw engine's Pod %s: %w", name, err)
	}
	if end == msFailed {
		return measured{}, fmt.Errorf("the raw engine's Pod %s failed:\n%s", name, out)
	}
	lines := logLineTimes(string(out))
	if err := cb.c.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
		return measured{}, err
	}
	if _, err := cb.tl.waitAny(ctx, key, msPodGone); err != nil {
		return measured{}, err
	}
	after, err := cb.snap(ctx, false)
	if err != nil {
		return measured{}, err
	}
	w := after.sub(before)
	w.writes["pods"] -= 2 // the harness's create and delete
	times := sampleTimes{start: start, at: map[string]time.Time{
		"scheduled": cb.tl.get(key, msPodScheduled), "running": cb.tl.get(key, msRunning),
		"init": lines["init-done"], "apply": lines["apply-done"],
		"exited": cb.tl.get(key, msExited), "succeeded": cb.tl.get(key, msSucceeded),
	}}
	s := measured{total: times.at["succeeded"].Sub(start).Seconds(), times: times, w: w, started: start, ended: after.at}
	if t := lines[last]; !t.IsZero() {
		s.engineEnd = t.Sub(start).Seconds()
	}
	return s, nil
}

// rawPod is the raw engine's Pod: the runner image on the node, the
// runner Pod's security context, the module from a ConfigMap, provider-
// less (terraform_data is built in), local state in an emptyDir.
func (cb *clusterBench) rawPod(name string) *corev1.Pod {
	uid := int64(65532)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: cb.co.ns, Name: name, Labels: map[string]string{rawSampleLabel: "true"}},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name:    rawContainer,
				Image:   cb.runnerImage,
				Command: []string{"/bin/sh", "-c", rawScript},
				Env: []corev1.EnvVar{{Name: "CHECKPOINT_DISABLE", Value: "1"}, {Name: "TF_IN_AUTOMATION", Value: "1"},
					{Name: "HOME", Value: "/tmp"}},
				SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "module", MountPath: "/module", ReadOnly: true},
					{Name: "work", MountPath: "/work"}, {Name: "tmp", MountPath: "/tmp"}},
			}},
			Volumes: []corev1.Volume{
				{Name: "module", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: rawModuleConfigMap}}}},
				{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
}

// landformSample creates one Terraform object and waits until it is Ready
// with its outputs, then until its runner Pod is gone.
func (cb *clusterBench) landformSample(ctx context.Context, name string) (measured, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	key := cb.co.ns + "/" + name
	sum0, count0, err := runnerStarts(cb.ctrl.metricsURL, "pod")
	if err != nil {
		return measured{}, err
	}
	before, err := cb.snap(ctx, true)
	if err != nil {
		return measured{}, err
	}
	start := time.Now()
	if err := cb.createTerraform(ctx, cb.co.ns, name); err != nil {
		return measured{}, err
	}
	done, err := cb.tr.wait(ctx, []string{key}, cb.rev)
	if err != nil {
		return measured{}, fmt.Errorf("%s did not become Ready with its outputs: %w", name, err)
	}
	if cb.podReuse() != "" {
		err = cb.waitIdle(ctx)
	} else {
		_, err = cb.tl.waitAny(ctx, key, msPodGone)
	}
	if err != nil {
		return measured{}, err
	}
	after, err := cb.snap(ctx, false)
	if err != nil {
		return measured{}, err
	}
	sum1, count1, err := runnerStarts(cb.ctrl.metricsURL, "pod")
	if err != nil {
		return measured{}, err
	}
	w := after.sub(before)
	w.writes["terraforms"]-- // the harness's create
	s := measured{total: done[key].Sub(start).Seconds(), w: w, started: start, ended: after.at}
	if n := count1 - count0; n > 0 {
		s.runnerStart = (sum1 - sum0) / n
	}
	var initDone time.Time
	if plan := cb.run(key, "plan", start); plan.id != "" {
		since := metav1.NewTime(start.Add(-2 * time.Second))
		out, err := cb.kube.CoreV1().Pods(cb.co.controllerNS).GetLogs(cb.ctrl.pod.Name, &corev1.PodLogOptions{Container: "manager", SinceTime: &since}).DoRaw(ctx)
		if err != nil {
			return measured{}, fmt.Errorf("the controller's log: %w", err)
		}
		_, initDone = runLogTimes(string(out), key, plan.id)
	}
	s.times = cb.landformTimes(key, start, done[key], initDone, s.runnerStart)
	return s, nil
}

// run is the first run of action recorded on object key since start.
func (cb *clusterBench) run(key, action string, start time.Time) runSeen {
	for _, r := range cb.tr.runsSince(start) {
		if r.key == key && r.action == action {
			return r
		}
	}
	return runSeen{}
}

// landformTimes is object key's timeline from its create (start) to done,
// from the watches; initDone and runnerStart (the controller's
// landform_runner_start_seconds) when known.
func (cb *clusterBench) landformTimes(key string, start, done, initDone time.Time, runnerStart float64) sampleTimes {
	plan, apply := cb.run(key, "plan", start), cb.run(key, "apply", start)
	var answered time.Time
	if !plan.at.IsZero() && runnerStart > 0 {
		answered = plan.at.Add(time.Duration(runnerStart * float64(time.Second)))
	}
	return sampleTimes{start: start, at: map[string]time.Time{
		"recorded": plan.at, "pod": cb.tl.get(key, msPodCreated), "scheduled": cb.tl.get(key, msPodScheduled),
		"running": cb.tl.get(key, msRunning), "answering": answered, "init": initDone,
		// An auto-approved plan applied at once has no event of its own
		// (its Applied event tells it, after the outputs are written): the
		// apply's recording ends the plan, and Applied the outputs.
		"planned":       cmp.Or(cb.tl.get(key, eventMilestone(infrav1.PlannedWithChangesReason)), apply.at),
		"applyRecorded": apply.at,
		"applied":       cb.tl.get(key, eventMilestone(infrav1.AppliedReason)),
		"ready":         done,
	}}
}

// createTerraform creates a bench object: auto-approved, outputs to a
// Secret, checked hourly, and deletionPolicy Orphan so that cleaning up
// runs nothing.
func (cb *clusterBench) createTerraform(ctx context.Context, ns, name string) error {
	return cb.c.Create(ctx, &infrav1.Terraform{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: infrav1.TerraformSpec{
			SourceRef:            infrav1.SourceReference{Kind: sourcev1.GitRepositoryKind, Name: benchRepo},
			Path:                 "./",
			Interval:             metav1.Duration{Duration: interval},
			ApprovePlan:          infrav1.ApprovePlanAuto,
			DeletionPolicy:       infrav1.DeletionPolicyOrphan,
			WriteOutputsToSecret: &infrav1.WriteOutputsToSecretSpec{Name: name + "-outputs"},
		},
	})
}

// scale creates N objects at once and waits until all are Ready, then
// until their runner Pods are gone.
func (cb *clusterBench) scale(ctx context.Context, r *ClusterReport) error {
	if err := cb.scaleInto(ctx, &r.Scale, cb.co.n, r.Machine.Cores); err != nil {
		return err
	}
	r.Machine.OthersCPUs = r.Scale.Others
	return nil
}

// scaleInto measures n objects created at once into s: Landform's, or the
// peer's when cb measures one (cluster_peer.go). What only Landform tells
// (its runner start metric, its runs and their phases) is left out for the
// peer.
func (cb *clusterBench) scaleInto(ctx context.Context, s *ClusterScale, n, cores int) error {
	if err := cb.settle(ctx); err != nil {
		return err
	}
	landform := cb.peer == nil
	create := cb.createTerraform
	if !landform {
		create = cb.createPeerObject
	}
	s.N, s.LoadStart = n, loadAvg()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s/obj-%s-%04d", cb.co.ns, cb.tok, i)
	}
	created0, _, others0 := cb.tl.podCounts()
	var sum0, count0 float64
	if landform {
		var err error
		if sum0, count0, err = runnerStarts(cb.ctrl.metricsURL, "pod"); err != nil {
			return err
		}
	}
	before, err := cb.snap(ctx, true)
	if err != nil {
		return err
	}
	start := time.Now()
	created, err := createAll(ctx, keys, create)
	if err != nil {
		return err
	}
	log("%s: created %d objects in %.1fs", cb.controllerName(), n, time.Since(start).Seconds())
	done, err := waitAll(ctx, cb.tr, keys, cb.rev, "Ready")
	if err != nil {
		return fmt.Errorf("%d of %d objects Ready: %w", len(done), n, err)
	}
	lat, last := latencies(done, func(k string) time.Time { return created[k] })
	if landform {
		var times []sampleTimes
		for _, k := range keys {
			times = append(times, cb.landformTimes(k, created[k], done[k], time.Time{}, 0))
		}
		s.Phases = phaseStats(scalePhases, times)
	}
	if err := cb.waitIdle(ctx); err != nil {
		return err
	}
	after, err := cb.snap(ctx, false)
	if err != nil {
		return err
	}
	if landform {
		sum1, count1, err := runnerStarts(cb.ctrl.metricsURL, "pod")
		if err != nil {
			return err
		}
		if c := count1 - count0; c > 0 {
			s.RunnerStartMeanSeconds = (sum1 - sum0) / c
		}
		runs := cb.tr.runsSince(start)
		s.RunsStarted, s.RunsByAction = len(runs), map[string]int{}
		for _, run := range runs {
			s.RunsByAction[run.action]++
		}
	}
	w := after.sub(before)
	w.writes["terraforms"] -= n // the harness's creates
	created1, maxLive, others1 := cb.tl.podCounts()
	s.AllReadySeconds = last.Sub(start).Seconds()
	s.AllGoneSeconds = after.at.Sub(start).Seconds()
	s.P50Seconds, s.P95Seconds, s.MaxSeconds = percentile(lat, 50), percentile(lat, 95), percentile(lat, 100)
	s.CPU = w.cpu
	s.CPUPerObject = w.cpu.Total() / float64(n)
	s.CPUBound = w.cpu.Total() / float64(cores)
	s.RunnerPods, s.MaxPodsAtOnce, s.OtherPods = created1-created0, maxLive, others1-others0
	s.APIWritesByRes = w.writes
	s.APIWrites = sum(w.writes)
	s.APIWritesPerObject = float64(s.APIWrites) / float64(n)
	s.MachineBusy = w.busy
	s.Others = w.busy - w.cpu.Total() - w.harness
	s.LoadEnd = loadAvg()
	if landform && cb.podReuse() != "" {
		if s.PodsKept, err = podsKept(cb.ctrl.metricsURL); err != nil {
			return err
		}
	}
	log("%s, %d objects: all Ready in %.1fs (p50 %.1fs, p95 %.1fs), runner Pods gone at %.1fs; %.1f CPU-s", cb.controllerName(), n,
		s.AllReadySeconds, s.P50Seconds, s.P95Seconds, s.AllGoneSeconds, w.cpu.Total())
	return nil
}
