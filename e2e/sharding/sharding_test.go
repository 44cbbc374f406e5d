package sharding

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/leaderelection"
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
	g := NewWithT(t)
	ctx := context.Background()
	ns := suite.Namespace(t)
	g.Expect(client.IgnoreAlreadyExists(suite.Env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: leaseNamespace}}))).To(Succeed())
	suite.Publish(t, ns, map[string]string{"main.tf": module})

	selectors := map[string]string{
		"shard1": shardKey + " in (shard1)",
		"shard2": shardKey + " in (shard2)",
		"main":   "!" + shardKey,
	}
	controllers := map[string]*testenv.Controller{}
	for name, sel := range selectors {
		// Leader election and its own metrics port, which says what it
		// reconciled.
		controllers[name] = suite.StartController(t, testenv.ControllerOptions{
			Name: "controller " + name, WorkDir: t.TempDir(), Metrics: true,
			Args: []string{"--enable-leader-election", "--concurrent-runs=2", "--watch-label-selector=" + sel},
			Env:  []string{"POD_NAMESPACE=" + leaseNamespace},
		})
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
			g.Expect(suite.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)).To(Succeed())
			g.Expect(conditions.IsReady(obj)).To(BeTrue(), "%s Ready: %s", name, conditions.GetMessage(obj, meta.ReadyCondition))
			g.Expect(obj.Status.ObservedGeneration).To(Equal(obj.Generation))
			s := &corev1.Secret{}
			g.Expect(suite.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-outputs"}, s)).To(Succeed())
			g.Expect(string(s.Data["effects"])).To(Equal(effects[name]))
		}).WithTimeout(90*time.Second).WithPolling(500*time.Millisecond).Should(Succeed(), "%s becomes Ready with its outputs", name)
	}
	for name, path := range effects {
		b, err := os.ReadFile(path)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(b)).To(Equal("created\n"), "%s was created once", name)
	}

	for cname, c := range controllers {
		reconciled := reconciledObjects(g, c, ns)
		for name, shard := range owner {
			if shard == cname {
				g.Expect(reconciled).To(HaveKey(name), "%s reconciled %s, its own", cname, name)
			} else {
				g.Expect(reconciled).NotTo(HaveKey(name), "%s never reconciled %s, of %s", cname, name, shard)
			}
		}
		g.Expect(c.Exited()).To(BeFalse(), "%s still runs", cname)
	}

	// Each controller leads its own Lease, named as Flux's controllers
	// name a shard's.
	for cname, sel := range selectors {
		lease := &coordinationv1.Lease{}
		key := client.ObjectKey{Namespace: leaseNamespace, Name: leaderelection.GenerateID(baseLeaderElectionID, sel)}
		g.Expect(suite.Env.Client.Get(ctx, key, lease)).To(Succeed(), "the Lease of %s", cname)
		g.Expect(lease.Spec.HolderIdentity).To(HaveValue(Not(BeEmpty())), "%s leads its Lease", cname)
	}
}

var reconcileCount = regexp.MustCompile(`^gotk_reconcile_duration_seconds_count\{(.*)\} (\S+)$`)
var label = regexp.MustCompile(`(\w+)="([^"]*)"`)

// reconciledObjects reads the controller's /metrics: how many times it
// reconciled each Terraform object of ns.
func reconciledObjects(g Gomega, c *testenv.Controller, ns string) map[string]int {
	resp, err := http.Get(c.MetricsURL)
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

// newTerraform creates an auto-approved object on the module in shard
// (no label for "main"), its effects in effects and its outputs in
// <name>-outputs.
func newTerraform(t *testing.T, ns, name, shard, effects string, mutate func(*infrav1.Terraform)) {
	t.Helper()
	tf := suite.Terraform(ns, name, 2*time.Second, infrav1.Variable{Name: "effects", Value: testenv.JSONValue(effects)})
	if shard != "main" {
		tf.Labels = map[string]string{shardKey: shard}
	}
	mutate(tf)
	NewWithT(t).Expect(suite.Env.Client.Create(context.Background(), tf)).To(Succeed())
}
