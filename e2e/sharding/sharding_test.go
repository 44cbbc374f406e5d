package sharding

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/leaderelection"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/testenv"
)

// module: each create of terraform_data.this appends a line to
// var.effects, so the file counts the creates.
const module = `
variable "effects" { type = string }
resource "terraform_data" "this" {
  input = var.effects
  provisioner "local-exec" {
    command = "echo created >> ${var.effects}"
  }
}
output "effects" { value = terraform_data.this.output }
`

const (
	shardKey = "sharding.fluxcd.io/key"
	// leaseNamespace holds the controllers' leader election Leases
	// (POD_NAMESPACE, as in a cluster).
	leaseNamespace = "landform-system"
	// baseLeaderElectionID is an unsharded controller's Lease.
	baseLeaderElectionID = "landform-controller.infra.landform.dev"
)

// Two shards and the main controller, each with its own selector, reconcile
// disjoint objects: every object becomes Ready with its outputs, its create
// ran once, and only its own controller ever reconciled it (the
// gotk_reconcile_* series each controller serves name only the objects it
// reconciled). A dependsOn across shards is met. Each controller holds its
// own leader election Lease.
func TestShardsReconcileDisjointObjects(t *testing.T) {
	if skipReason != "" {
		t.Skip(skipReason)
	}
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: leaseNamespace}}))).To(Succeed())
	publish(t, ns, map[string]string{"main.tf": module})

	selectors := map[string]string{
		"shard1": shardKey + " in (shard1)",
		"shard2": shardKey + " in (shard2)",
		"main":   "!" + shardKey,
	}
	controllers := map[string]*controller{}
	for name, sel := range selectors {
		controllers[name] = startController(t, name, "--watch-label-selector="+sel)
	}

	// owner is the controller each object belongs to; a-1 depends on b-2,
	// which is in the other shard.
	owner := map[string]string{"a-1": "shard1", "c-1": "shard1", "b-2": "shard2", "m": "main"}
	effects := map[string]string{}
	for name, shard := range owner {
		effects[name] = filepath.Join(t.TempDir(), name)
		newTerraform(t, ns, name, shard, effects[name], func(tf *infrav1.Terraform) {
			if name == "a-1" {
				tf.Spec.DependsOn = []infrav1.DependencyReference{{Name: "b-2"}}
			}
		})
	}

	for name := range owner {
		g.Eventually(func(g Gomega) {
			obj := &infrav1.Terraform{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)).To(Succeed())
			g.Expect(conditions.IsReady(obj)).To(BeTrue(), "%s Ready: %s", name, conditions.GetMessage(obj, meta.ReadyCondition))
			g.Expect(obj.Status.ObservedGeneration).To(Equal(obj.Generation))
			s := &corev1.Secret{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-outputs"}, s)).To(Succeed())
			g.Expect(string(s.Data["effects"])).To(Equal(effects[name]))
		}).WithTimeout(90*time.Second).WithPolling(500*time.Millisecond).Should(Succeed(), "%s becomes Ready with its outputs", name)
	}
	for name, path := range effects {
		b, err := os.ReadFile(path)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(b)).To(Equal("created\n"), "%s was created once", name)
	}

	for cname, c := range controllers {
		reconciled := c.reconciledObjects(g, ns)
		for name, shard := range owner {
			if shard == cname {
				g.Expect(reconciled).To(HaveKey(name), "%s reconciled %s, its own", cname, name)
			} else {
				g.Expect(reconciled).NotTo(HaveKey(name), "%s never reconciled %s, of %s", cname, name, shard)
			}
		}
		g.Expect(c.exited()).To(BeFalse(), "%s still runs", cname)
	}

	// Each controller leads its own Lease, named as Flux's controllers
	// name a shard's.
	for cname, sel := range selectors {
		lease := &coordinationv1.Lease{}
		key := client.ObjectKey{Namespace: leaseNamespace, Name: leaderelection.GenerateID(baseLeaderElectionID, sel)}
		g.Expect(env.Client.Get(ctx, key, lease)).To(Succeed(), "the Lease of %s", cname)
		g.Expect(lease.Spec.HolderIdentity).To(HaveValue(Not(BeEmpty())), "%s leads its Lease", cname)
	}
}

// controller is the real landform-controller as a child process.
type controller struct {
	name    string
	cmd     *exec.Cmd
	logs    *testenv.SyncBuffer
	metrics string // URL of its /metrics
	done    chan struct{}
}

// startController runs landform-controller with local runners, leader
// election and its own work directory and metrics port, and waits until
// it serves metrics.
func startController(t *testing.T, name string, args ...string) *controller {
	t.Helper()
	g := NewWithT(t)
	port := freePort(t)
	c := &controller{
		name: name, logs: &testenv.SyncBuffer{}, done: make(chan struct{}),
		metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", port),
	}
	flags := []string{
		"--runner=local", "--runner-binary", bins.runner, "--engine", bins.tofu,
		"--work-dir", t.TempDir(), "--leader-elect",
		fmt.Sprintf("--metrics-addr=127.0.0.1:%d", port), "--health-addr=0",
		"--concurrent-runs=2", "--drain-timeout=10s",
	}
	c.cmd = exec.Command(bins.controller, append(flags, args...)...)
	c.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "POD_NAMESPACE="+leaseNamespace, "CHECKPOINT_DISABLE=1")
	// Its own process group, so that its runners and engines go with it.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out io.Writer = c.logs
	if verbose {
		out = io.MultiWriter(c.logs, os.Stderr)
	}
	c.cmd.Stdout, c.cmd.Stderr = out, out
	g.Expect(c.cmd.Start()).To(Succeed())
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
		if t.Failed() && !verbose {
			t.Logf("controller %s (%s) output:\n%s", name, strings.Join(args, " "), c.logs.String())
		}
	})
	g.Eventually(func() error {
		if c.exited() {
			return StopTrying(fmt.Sprintf("controller %s exited:\n%s", name, c.logs.String()))
		}
		resp, err := http.Get(c.metrics)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}).WithTimeout(30 * time.Second).Should(Succeed())
	return c
}

func (c *controller) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

var reconcileCount = regexp.MustCompile(`^gotk_reconcile_duration_seconds_count\{(.*)\} (\S+)$`)
var label = regexp.MustCompile(`(\w+)="([^"]*)"`)

// reconciledObjects reads the controller's /metrics: how many times it
// reconciled each Terraform object of ns.
func (c *controller) reconciledObjects(g Gomega, ns string) map[string]int {
	resp, err := http.Get(c.metrics)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := reconcileCount.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, l := range label.FindAllStringSubmatch(m[1], -1) {
			labels[l[1]] = l[2]
		}
		if labels["kind"] != infrav1.TerraformKind || labels["namespace"] != ns {
			continue
		}
		n, err := strconv.ParseFloat(m[2], 64)
		g.Expect(err).NotTo(HaveOccurred())
		counts[labels["name"]] = int(n)
	}
	g.Expect(sc.Err()).NotTo(HaveOccurred())
	return counts
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// newTerraform creates an auto-approved object on the module in shard
// (no label for "main"), its effects in effects and its outputs in
// <name>-outputs.
func newTerraform(t *testing.T, ns, name, shard, effects string, mutate func(*infrav1.Terraform)) {
	t.Helper()
	tf := &infrav1.Terraform{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: infrav1.TerraformSpec{
			SourceRef:            infrav1.SourceReference{Kind: sourcev1.GitRepositoryKind, Name: "repo"},
			Path:                 "./",
			Interval:             metav1.Duration{Duration: time.Hour},
			RetryInterval:        &metav1.Duration{Duration: 2 * time.Second},
			ApprovePlan:          infrav1.ApprovePlanAuto,
			Vars:                 []infrav1.Variable{{Name: "effects", Value: testenv.JSONValue(effects)}},
			WriteOutputsToSecret: &infrav1.WriteOutputsToSecretSpec{Name: name + "-outputs"},
		},
	}
	if shard != "main" {
		tf.Labels = map[string]string{shardKey: shard}
	}
	mutate(tf)
	NewWithT(t).Expect(env.Client.Create(context.Background(), tf)).To(Succeed())
}

// publish serves files as a tarball artifact and points a GitRepository
// "repo" in ns at it, as source-controller would.
func publish(t *testing.T, ns string, files map[string]string) {
	t.Helper()
	_, err := artifacts.Publish(context.Background(), env.Client, ns, files)
	NewWithT(t).Expect(err).To(Succeed())
}
