package main

// `make bench-cluster-peer`: Landform and tofu-controller on the same
// node, each given N objects at once, one after the other, with the same
// module, the same GitRepository contents and the same measurement (the
// scale phase of the cluster bench). e2e/cluster/bench-peer.sh builds and
// installs tofu-controller from a checkout of its source with its own
// chart; this file measures it.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/landform-dev/landform/internal/testenv"
)

// peerOptions name the controller measured beside Landform.
type peerOptions struct {
	name         string // only "tofu-controller"
	ns           string // the peer's objects' namespace, of the bench's own
	controllerNS string // the peer chart's release namespace
	source       string // what was built, for the report (e2e/cluster/bench-peer.sh)
}

// tofuControllerGVK is tofu-controller's Terraform kind, read as
// unstructured: the bench does not import tofu-controller's API.
var tofuControllerGVK = schema.GroupVersionKind{Group: "infra.contrib.fluxcd.io", Version: "v1alpha2", Kind: "Terraform"}

// tofuControllerTarget is the target beside tofu-controller.
const tofuControllerTarget = "objects at once beside tofu-controller"

// ClusterComparison is Landform and a peer controller each given N objects
// at once on the same node, one after the other.
type ClusterComparison struct {
	Date     string       `json:"date"`
	Revision string       `json:"revision"`
	Machine  Machine      `json:"machine"`
	Landform ClusterSetup `json:"landform"`
	Peer     PeerSetup    `json:"peer"`
	N        int          `json:"n"`
	// LandformScale and PeerScale are the same measurement; the peer's
	// has no runner start, runs or phases (Landform's metrics and status
	// give those).
	LandformScale ClusterScale `json:"landformScale"`
	PeerScale     ClusterScale `json:"peerScale"`
	Targets       []Target     `json:"targets"`
}

// PeerSetup is the peer controller as measured.
type PeerSetup struct {
	Name            string   `json:"name"`
	Source          string   `json:"source"`
	ControllerImage string   `json:"controllerImage"`
	RunnerImage     string   `json:"runnerImage"`
	ControllerArgs  []string `json:"controllerArgs"`
	Namespace       string   `json:"namespace"`
}

// comparisonPath is where the comparison with peer is kept beside the
// default run's report main: docs/benchmarks-cluster-tofu-controller.json.
func comparisonPath(main, peer string) string {
	return strings.TrimSuffix(main, ".json") + "-cluster-" + peer + ".json"
}

// readComparison reads the comparison with peer kept beside main; nil
// without error when there is none.
func readComparison(main, peer string) (*ClusterComparison, error) {
	var c ClusterComparison
	err := readJSONFile(comparisonPath(main, peer), &c)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// controllerName is who cb measures, for the log.
func (cb *clusterBench) controllerName() string {
	if cb.peer != nil {
		return cb.peer.name
	}
	return "Landform"
}

// compare measures Landform's N objects, then the peer's, and writes the
// comparison. Landform goes first: the peer's objects then find the node
// as Landform's found it, with the images in containerd and the module's
// artifact in source-controller.
func (cb *clusterBench) compare(ctx context.Context, r *ClusterReport) error {
	co := cb.co
	if co.peer.name != "tofu-controller" {
		return fmt.Errorf("-cluster-peer=%q: the bench knows only tofu-controller", co.peer.name)
	}
	if co.n <= 0 {
		return fmt.Errorf("-cluster-n=%d: the comparison needs objects", co.n)
	}
	c := &ClusterComparison{Date: r.Date, Revision: r.Revision, Machine: r.Machine, Landform: r.Cluster, N: co.n}
	pb, err := cb.forPeer(ctx, &c.Peer)
	if err != nil {
		return err
	}
	log("cleaning up what an earlier run left in %s and %s", co.ns, co.peer.ns)
	if err := cb.cleanup(ctx); err != nil {
		return err
	}
	if err := pb.cleanupPeer(ctx); err != nil {
		return err
	}
	if err := cb.prepare(ctx); err != nil {
		return err
	}
	if err := cb.scaleInto(ctx, &c.LandformScale, co.n, r.Machine.Cores); err != nil {
		return fmt.Errorf("Landform, %d objects: %w", co.n, err)
	}
	if err := cb.cleanup(ctx); err != nil {
		return err
	}
	if err := pb.prepare(ctx); err != nil {
		return err
	}
	if err := pb.scaleInto(ctx, &c.PeerScale, co.n, r.Machine.Cores); err != nil {
		return fmt.Errorf("%s, %d objects: %w", co.peer.name, co.n, err)
	}
	if err := pb.cleanupPeer(ctx); err != nil {
		return err
	}
	if err := cb.checkController(ctx); err != nil {
		return err
	}
	if err := pb.checkController(ctx); err != nil {
		return err
	}
	targets, err := endRun(&c.Machine, c.targets, cb.o.notes)
	if err != nil {
		return err
	}
	c.Targets = targets
	path := comparisonPath(cb.o.outJSON, co.peer.name)
	if err := writeReportFile(path, c); err != nil {
		return err
	}
	log("wrote %s", path)
	return render(cb.o.outJSON, cb.o.outMD, cb.o.notes, false)
}

// forPeer is a clusterBench for the peer's namespace and controller,
// sharing cb's clients, meters and run token, with watches of its own.
func (cb *clusterBench) forPeer(ctx context.Context, setup *PeerSetup) (*clusterBench, error) {
	po := cb.co.peer
	pb := *cb
	pb.peer = &po
	pb.co.ns = po.ns
	pb.co.controllerNS = po.controllerNS
	pb.tr, pb.tl = newTracker(), newTimeline(po.ns)
	if err := pb.findPeerController(ctx, setup); err != nil {
		return nil, err
	}
	pb.tr.startPeer(ctx, pb.c, po.ns, tofuControllerGVK)
	pb.tl.start(ctx, pb.c)
	return &pb, nil
}

// findPeerController finds the peer chart's controller Pod and its
// container's cgroup, as findController does Landform's.
func (cb *clusterBench) findPeerController(ctx context.Context, setup *PeerSetup) error {
	po := cb.peer
	pod, err := cb.deploymentPod(ctx, po.controllerNS, po.name)
	if err != nil {
		return fmt.Errorf("%w (e2e/cluster/bench-peer.sh installs %s)", err, po.name)
	}
	ctr, status := containerOf(pod, po.name)
	if ctr == nil || status == nil || status.ContainerID == "" {
		return fmt.Errorf("%s Pod %s has no %s container running", po.name, pod.Name, po.name)
	}
	cgroup, err := containerCgroup(cb.co.cgroupRoot, string(pod.UID), status.ContainerID)
	if err != nil {
		return err
	}
	*setup = PeerSetup{Name: po.name, Source: po.source, ControllerImage: status.Image + " (" + status.ImageID + ")", Namespace: po.ns,
		ControllerArgs: ctr.Args}
	for _, e := range ctr.Env {
		if e.Name == "RUNNER_POD_IMAGE" {
			setup.RunnerImage = e.Value
		}
	}
	cb.ctrl = clusterController{pod: pod, cgroup: cgroup, args: setup.ControllerArgs, restarts: status.RestartCount, container: po.name}
	return nil
}

// listOf is an empty list of kind gvk, read as unstructured.
func listOf(gvk schema.GroupVersionKind) *unstructured.UnstructuredList {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	return list
}

// createPeerObject creates the peer's equivalent of createTerraform's
// object: auto-approved, outputs written to <name>-outputs, the same
// GitRepository and interval; the state stays when it is deleted (the
// peer's default).
func (cb *clusterBench) createPeerObject(ctx context.Context, ns, name string) error {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{
			"sourceRef":            map[string]any{"kind": "GitRepository", "name": benchRepo},
			"path":                 "./",
			"interval":             interval.String(),
			"approvePlan":          "auto",
			"writeOutputsToSecret": map[string]any{"name": name + "-outputs"},
		},
	}}
	u.SetGroupVersionKind(tofuControllerGVK)
	return cb.c.Create(ctx, u)
}

// cleanupPeer deletes the peer's objects in its namespace, removing their
// finalizers once they are being deleted (nothing is destroyed: their
// module made nothing outside the cluster), then what cleanup deletes.
func (cb *clusterBench) cleanupPeer(ctx context.Context) error {
	list := listOf(tofuControllerGVK)
	if err := cb.c.List(ctx, list, client.InNamespace(cb.co.ns)); err != nil {
		return fmt.Errorf("listing %s's objects (are its CRDs installed?): %w", cb.peer.name, err)
	}
	for i := range list.Items {
		u := &list.Items[i]
		if err := cb.c.Delete(ctx, u); client.IgnoreNotFound(err) != nil {
			return err
		}
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
		if err := cb.c.Patch(ctx, u, patch); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if err := testenv.Poll(ctx, 5*time.Minute, 200*time.Millisecond, cb.peer.name+"'s objects to go", func() (bool, string, error) {
		left := listOf(tofuControllerGVK)
		if err := cb.c.List(ctx, left, client.InNamespace(cb.co.ns)); err != nil {
			return false, "", err
		}
		return len(left.Items) == 0, fmt.Sprintf("%d left", len(left.Items)), nil
	}); err != nil {
		return err
	}
	return cb.cleanup(ctx)
}

// peerTimeTarget is the most of the peer's all-Ready time Landform's may
// take: issue 36's 0.65× (issue 25 had asked for half).
const peerTimeTarget = 0.65

// targets is the target: N objects all Ready in at most
// peerTimeTarget of the peer's time; and, for the record, the CPU per
// object beside the peer's.
func (c *ClusterComparison) targets() []Target {
	l, p := c.LandformScale, c.PeerScale
	ratio := l.AllReadySeconds / nonZero(p.AllReadySeconds)
	cpu := l.CPUPerObject / nonZero(p.CPUPerObject)
	return []Target{{
		Name: fmt.Sprintf("%d %s", c.N, tofuControllerTarget), Want: fmt.Sprintf("all Ready in ≤ %.2g× tofu-controller's time", peerTimeTarget),
		Measured: fmt.Sprintf("%.1f s vs %.1f s: %.2f×; CPU per object %.2f s vs %.2f s: %.2f×", l.AllReadySeconds, p.AllReadySeconds, ratio,
			l.CPUPerObject, p.CPUPerObject, cpu),
		Met: ptr.To(ratio <= peerTimeTarget),
	}}
}

// applyNotes copies notes[target name] into each target not met.
func (c *ClusterComparison) applyNotes(notes map[string]string) {
	rr := Report{Targets: c.Targets}
	rr.applyNotes(notes)
}

// writeMarkdown renders the comparison under the cluster section.
func (c *ClusterComparison) writeMarkdown(p printer) {
	l, q := c.LandformScale, c.PeerScale
	p("\n### Beside tofu-controller\n\n")
	p("Measured on %s from %s by `make bench-cluster-peer` (figures in [benchmarks-cluster-%s.json](benchmarks-cluster-%s.json)):\n",
		c.Date, c.Revision, c.Peer.Name, c.Peer.Name)
	p("%d objects created at once for Landform, then, once its runner Pods were gone, %d for %s, on the same node, with the\n", c.N, c.N, c.Peer.Name)
	p("same module, the same repository contents (a GitRepository of each's own namespace), auto-approval, outputs written to a\n")
	p("Secret, the `kubernetes` backend and the same OpenTofu binary in both runner images. Each controller runs as its chart\n")
	p("installs it, with its chart's defaults but for the images (Landform with `--concurrent-runs=%s`, %s with `%s`).\n",
		flagOf(c.Landform.ControllerArgs, "concurrent-runs"), c.Peer.Name, "--concurrent="+flagOf(c.Peer.ControllerArgs, "concurrent"))
	gone := "last runner Pod gone"
	if reuse := flagOf(c.Landform.ControllerArgs, "runner-pod-reuse"); reuse != "" && l.PodsKept > 0 {
		p("Landform keeps runner Pods for reuse (`--runner-pod-reuse=%s`): its %d objects ran in %d runner Pods, each recycled\n", reuse, c.N, l.RunnerPods)
		p("between objects, and its window ends once they are idle and kept (%d), not gone.\n", l.PodsKept)
		gone = "last runner Pod gone (Landform: or idle and kept)"
	}
	p("%s is built from %s by `e2e/cluster/bench-peer.sh` (its manager and runner, CGO disabled, in images assembled without Docker\n", c.Peer.Name, c.Peer.Source)
	p("as `make images` does Landform's); its controller reaches its runner Pods by their `<ip>.<namespace>.pod.cluster.local`\n")
	p("names, which a stand-in for cluster DNS on the node answers (`e2e/poddns`). The CPU is the same sum as above: the\n")
	p("controller's container, the runner Pods, the kubelet, containerd and its shims, the API server and etcd, until the last\n")
	p("runner Pod was gone.\n\n")
	p("| | Landform | %s |\n|---|---|---|\n", c.Peer.Name)
	row := func(name, format string, f func(s ClusterScale) []any) {
		p("| %s | %s | %s |\n", name, fmt.Sprintf(format, f(l)...), fmt.Sprintf(format, f(q)...))
	}
	row("all Ready", "%.1f s", func(s ClusterScale) []any { return []any{s.AllReadySeconds} })
	row("latency p50 / p95 / max", "%.1f s / %.1f s / %.1f s", func(s ClusterScale) []any { return []any{s.P50Seconds, s.P95Seconds, s.MaxSeconds} })
	row(gone, "%.1f s", func(s ClusterScale) []any { return []any{s.AllGoneSeconds} })
	row("runner Pods created / most at once", "%d / %d", func(s ClusterScale) []any { return []any{s.RunnerPods, s.MaxPodsAtOnce} })
	row("CPU, until the last Pod was gone", "%.1f s", func(s ClusterScale) []any { return []any{s.CPU.Total()} })
	row("of which", "%s", func(s ClusterScale) []any { return []any{cpuParts(s.CPU)} })
	row("CPU per object", "%.2f s", func(s ClusterScale) []any { return []any{s.CPUPerObject} })
	row("API writes per object", "%.1f", func(s ClusterScale) []any { return []any{s.APIWritesPerObject} })
	row("machine CPU, other processes", "%.1f s, %.1f s", func(s ClusterScale) []any { return []any{s.MachineBusy, s.Others} })
	row("load average at start / end", "%s / %s", func(s ClusterScale) []any { return []any{s.LoadStart, s.LoadEnd} })
	p("\nAPI writes by resource: Landform %s; %s %s.\n\n", counts(l.APIWritesByRes), c.Peer.Name, counts(q.APIWritesByRes))
	for _, t := range c.Targets {
		p("**Target** (%s): %s. Measured: %s. %s\n", t.Name, t.Want, t.Measured, map[bool]string{true: "Met.", false: "Not met."}[ptr.Deref(t.Met, false)])
		if t.Why != "" {
			p("\n%s\n", t.Why)
		}
	}
}

// flagOf is the value of --name in args, "" without one.
func flagOf(args []string, name string) string { return controllerFlags(args)[name] }
