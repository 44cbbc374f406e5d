package controllers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/cli"
	"github.com/landform-dev/landform/internal/planstore"
	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/testenv"
	"github.com/landform-dev/landform/internal/tfstate"
	"github.com/landform-dev/landform/runner"
)

// slowModule creates a terraform_data whose create provisioner appends a
// line to var.effects, then sleeps var.sleep seconds: the number of lines
// is the number of creates that really ran.
func slowModule() map[string]string {
	return map[string]string{"modules/slow/main.tf": `
variable "effects" { type = string }
variable "sleep" {
  type    = number
  default = 0
}
resource "terraform_data" "this" {
  input = var.effects
  provisioner "local-exec" {
    command = "echo created >> ${var.effects} && sleep ${var.sleep}"
  }
}
output "effects" { value = terraform_data.this.output }
`}
}

// slow points tf at the slow module with these variables.
// newSlowTerraform creates GitRepository "repo" serving the slow module,
// and object name on it whose create sleeps sleep seconds, retried every
// retry; it returns the object and the file its effects go to.
func newSlowTerraform(t *testing.T, ns, name string, sleep int, retry time.Duration) (*infrav1.Terraform, string) {
	t.Helper()
	newGitRepository(t, ns, "repo", artifacts.publish(slowModule()))
	path := effectPath(t)
	return newTerraform(t, ns, name, func(tf *infrav1.Terraform) {
		slow(tf, path, sleep)
		tf.Spec.RetryInterval = &metav1.Duration{Duration: retry}
	}), path
}

func slow(tf *infrav1.Terraform, effects string, sleep int) {
	tf.Spec.Path = "modules/slow"
	tf.Spec.Vars = slowVars(effects, sleep)
}

func slowVars(effects string, sleep int) []infrav1.Variable {
	return []infrav1.Variable{
		{Name: "effects", Value: testenv.JSONValue(effects)},
		{Name: "sleep", Value: testenv.JSONValue(sleep)},
	}
}

// creates counts the lines the module's create provisioner wrote.
func creates(path string) int {
	return strings.Count(readFile(path), "created")
}

// stateLock reads obj's state lock; nil when free.
func stateLock(g Gomega, ns, name string) *statelock.LockInfo {
	info, err := statelock.Read(context.Background(), kubeClientset.CoordinationV1().Leases(ns), "lock-tfstate-default-"+name)
	g.Expect(err).NotTo(HaveOccurred())
	return info
}

// createUnderWay waits until the slow module's create has begun under
// the state lock of object name, and returns that lock and the runner
// holding it.
func createUnderWay(g Gomega, ns, name, path string) (*statelock.LockInfo, *statelock.Holder) {
	var lock *statelock.LockInfo
	g.Eventually(func(g Gomega) {
		g.Expect(creates(path)).To(Equal(1), "the create has begun")
		lock = stateLock(g, ns, name)
		g.Expect(lock).NotTo(BeNil())
	}, waitTimeout, pollEvery).Should(Succeed())
	holder, ok := statelock.ParseHolder(*lock)
	g.Expect(ok).To(BeTrue(), "the runner takes the lock under its own identity: %s", lock.Who)
	g.Expect(holder.Process).NotTo(BeNil())
	return lock, holder
}

// stateSerial is the serial of obj's state.
func stateSerial(g Gomega, ns, name string) int {
	data := secretData(g, ns, "tfstate-default-"+name)
	raw, err := tfstate.Decompress(data["tfstate"])
	g.Expect(err).NotTo(HaveOccurred())
	var st struct{ Serial int }
	g.Expect(json.Unmarshal(raw, &st)).To(Succeed())
	return st.Serial
}

// A runner killed mid-apply leaves its lock behind. The controller proves
// the runner gone, releases exactly that lock, says so in an event, and
// converges from the state as it is.
func TestRunnerKilledMidApplyReleasesItsLock(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	tf, path := newSlowTerraform(t, ns, "killed", 20, 5*time.Second)

	lock, holder := createUnderWay(g, ns, tf.Name, path)
	serialBefore := -1
	if s := (&corev1.Secret{}); k8sClient.Get(context.Background(), keyOf(ns, "tfstate-default-"+tf.Name), s) == nil {
		serialBefore = stateSerial(g, ns, tf.Name)
	}
	g.Expect(syscall.Kill(holder.Process.PID, syscall.SIGKILL)).To(Succeed())

	obj := waitReady(t, tf)
	g.Expect(stateSerial(g, ns, tf.Name)).To(BeNumerically(">", serialBefore), "the state serial only grew")
	g.Expect(hasEvent(g, ns, tf.Name, infrav1.StateLockReleasedReason, lock.ID)).To(BeTrue(), "an event names the released lock")
	g.Expect(hasEvent(g, ns, tf.Name, infrav1.RunLostReason, "")).To(BeTrue(), "an event says the run was lost")
	g.Expect(stateLock(g, ns, tf.Name)).To(BeNil(), "no lock is left")
	g.Expect(obj.Status.Run).To(BeNil())
	g.Expect(obj.Status.Lock).To(BeNil())
	g.Expect(secretData(g, ns, "tfstate-default-"+tf.Name)).NotTo(BeNil())
}

// A lock held by someone's own tofu is never broken by the controller: the
// condition names its holder, and `landform unlock --force` releases it.
func TestForeignLockIsNeverBroken(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	name := "foreign"
	tofu := holdLockWithTofu(t, ns, name)

	tf, path := newSlowTerraform(t, ns, name, 0, 2*time.Second)
	obj := waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(readyReasonOf(obj)).To(Equal(infrav1.StateLockedReason))
		g.Expect(obj.Status.Lock).NotTo(BeNil())
	})
	g.Expect(readyMessageOf(obj)).To(ContainSubstring("landform unlock"))
	lock := stateLock(g, ns, name)
	g.Expect(lock).NotTo(BeNil())
	g.Expect(obj.Status.Lock).NotTo(BeNil())
	g.Expect(obj.Status.Lock.ID).To(Equal(lock.ID))
	g.Expect(obj.Status.Lock.Holder).To(Equal(lock.Who), "the condition names the holder")
	g.Expect(obj.Status.Lock.Since).NotTo(BeNil(), "status.lock.since says when the lock was taken")

	// tofu dies without releasing: the lock stays; its holder is not a
	// Landform runner, so nothing proves it gone.
	tofu.kill()
	g.Consistently(func(g Gomega) {
		l := stateLock(g, ns, name)
		g.Expect(l).NotTo(BeNil())
		g.Expect(l.ID).To(Equal(lock.ID))
	}, 8*time.Second, time.Second).Should(Succeed(), "several retries later the lock is still there")
	g.Expect(creates(path)).To(Equal(0))

	var out bytes.Buffer
	cmd := cli.NewCommand(cli.Options{Streams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out}})
	cmd.SetArgs([]string{"--kubeconfig", testKubeconfig, "-n", ns, "unlock", "--force", name})
	g.Expect(cmd.Execute()).To(Succeed(), out.String())
	g.Expect(out.String()).To(ContainSubstring("Released lock " + lock.ID))

	waitReady(t, tf)
	g.Expect(creates(path)).To(Equal(1))
}

// tofuProcess is someone's own tofu holding a state lock.
type tofuProcess struct{ cmd *exec.Cmd }

func (p *tofuProcess) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	_ = p.cmd.Wait()
}

// holdLockWithTofu runs the real tofu against the state Landform keeps for
// ns/name and returns once it holds the lock (its apply sleeps).
func holdLockWithTofu(t *testing.T, ns, name string) *tofuProcess {
	t.Helper()
	g := NewWithT(t)
	run := testenv.TofuModule(t, tofuPath, testKubeconfig, ns, name, `
resource "terraform_data" "hold" {
  provisioner "local-exec" { command = "sleep 300" }
}
`)
	p := &tofuProcess{cmd: run("apply", "-auto-approve")}
	g.Expect(p.cmd.Start()).To(Succeed())
	t.Cleanup(p.kill)
	g.Eventually(func(g Gomega) {
		g.Expect(stateLock(g, ns, name)).NotTo(BeNil())
	}, time.Minute, 100*time.Millisecond).Should(Succeed(), "tofu takes the lock")
	return p
}

// A stored plan that cannot be applied — stale, with another dependency
// lock, or torn — is dropped and planned again once: no loop.
func TestUnusablePlansArePlannedAgainOnce(t *testing.T) {
	tests := []struct {
		name   string
		spoil  func(g Gomega, tf *infrav1.Terraform)
		reason string
	}{
		{name: "stale", spoil: func(g Gomega, tf *infrav1.Terraform) { bumpStateSerial(g, tf.Namespace, tf.Name) }},
		{name: "lockfile", spoil: func(g Gomega, tf *infrav1.Terraform) {
			p, err := planstore.Store{Client: k8sClient}.Load(context.Background(), get(g, tf))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.LockFile).NotTo(BeEmpty(), "the plan keeps its dependency lock file")
			p.LockFile = bytes.ReplaceAll(p.LockFile, []byte("h1:"), []byte("h1:AAAA"))
			g.Expect(planstore.Store{Client: k8sClient}.Save(context.Background(), get(g, tf), p)).To(Succeed())
			// Recorded as the controller would have, so that this case
			// reaches the runner's own check rather than the digest's.
			obj := get(g, tf)
			obj.Status.Plan.Digest = p.Digest
			g.Expect(k8sClient.Status().Update(context.Background(), obj)).To(Succeed())
		}},
		{name: "torn", spoil: func(g Gomega, tf *infrav1.Terraform) {
			var chunks corev1.SecretList
			g.Expect(k8sClient.List(context.Background(), &chunks, client.InNamespace(tf.Namespace), client.MatchingLabels{infrav1.OwnerNameLabel: tf.Name}, client.HasLabels{planstore.PlanLabel})).To(Succeed())
			g.Expect(chunks.Items).NotTo(BeEmpty())
			c := &chunks.Items[len(chunks.Items)-1]
			for k, v := range c.Data {
				c.Data[k] = append(v[:len(v)/2:len(v)/2], 'x')
			}
			g.Expect(k8sClient.Update(context.Background(), c)).To(Succeed())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			tf, path := newFileTerraform(t, ns, "plan-"+tt.name, "first", manualApproval)
			pending := waitPending(t, tf).Status.Plan.Pending
			if tt.name == "stale" {
				// A state to go stale: apply once, then plan a change.
				approve(g, tf, pending)
				waitReady(t, tf)
				g.Expect(k8sClient.Patch(context.Background(), get(g, tf), rawMergePatch([]byte(`{"spec":{"vars":[{"name":"path","value":"`+path+`"},{"name":"content","value":"second"}]}}`)))).To(Succeed())
				g.Eventually(func(g Gomega) {
					obj := get(g, tf)
					g.Expect(obj.Status.Plan).NotTo(BeNil())
					g.Expect(obj.Status.Plan.Pending).NotTo(BeEmpty())
					g.Expect(obj.Status.Plan.Pending).NotTo(Equal(pending))
					pending = obj.Status.Plan.Pending
				}, waitTimeout, pollEvery).Should(Succeed())
			}
			tt.spoil(g, tf)
			approve(g, tf, pending)

			obj := waitReady(t, tf)
			g.Expect(hasEvent(g, ns, tf.Name, infrav1.PlanUnusableReason, pending)).To(BeTrue(), "an event says the plan was dropped")
			g.Expect(obj.Status.LastAppliedPlan).To(Equal(pending), "the identical new plan kept its id and its approval")
			g.Consistently(func(g Gomega) {
				g.Expect(countEvents(g, ns, tf.Name, infrav1.PlanUnusableReason)).To(Equal(1))
			}, 5*time.Second, time.Second).Should(Succeed(), "dropped once, no loop")
		})
	}
}

// bumpStateSerial moves the state on behind the plan's back.
func bumpStateSerial(g Gomega, ns, name string) {
	s := &corev1.Secret{}
	g.Expect(k8sClient.Get(context.Background(), keyOf(ns, "tfstate-default-"+name), s)).To(Succeed())
	raw, err := tfstate.Decompress(s.Data["tfstate"])
	g.Expect(err).NotTo(HaveOccurred())
	var st map[string]any
	g.Expect(json.Unmarshal(raw, &st)).To(Succeed())
	st["serial"] = st["serial"].(float64) + 1
	raw, _ = json.Marshal(st)
	s.Data["tfstate"] = tfstate.Compress(raw)
	g.Expect(k8sClient.Update(context.Background(), s)).To(Succeed())
}

// Long applies hold no reconcile worker: with two workers and four applies
// of a minute each, a new object with an instant module is Ready at once,
// and an approval given meanwhile is applied before the long ones end.
func TestLongAppliesDoNotBlockOtherObjects(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	newGitRepository(t, ns, "repo", artifacts.publish(slowModule()))
	var long []*infrav1.Terraform
	for i := range 4 {
		path := effectPath(t)
		long = append(long, newTerraform(t, ns, fmt.Sprintf("long-%d", i), func(tf *infrav1.Terraform) {
			slow(tf, path, 60)
		}))
		defer func() {
			g.Eventually(func() int { return creates(path) }, waitTimeout, pollEvery).Should(Equal(1))
		}()
	}
	g.Eventually(func(g Gomega) {
		for _, tf := range long {
			obj := get(g, tf)
			g.Expect(obj.Status.Run).NotTo(BeNil())
			g.Expect(obj.Status.Run.Action).To(Equal(string(runner.Apply)), describe(obj))
		}
	}, waitTimeout, pollEvery).Should(Succeed(), "all four apply")

	manual := newTerraform(t, ns, "manual", func(tf *infrav1.Terraform) {
		tf.Spec.ApprovePlan = ""
		slow(tf, effectPath(t), 0)
	})
	quick := newTerraform(t, ns, "quick", func(tf *infrav1.Terraform) {
		slow(tf, effectPath(t), 0)
	})
	quickAt := time.Now()
	waitReady(t, quick)
	g.Expect(time.Since(quickAt)).To(BeNumerically("<", 20*time.Second), "the instant object is not queued behind the long applies")

	approve(g, manual, waitPending(t, manual).Status.Plan.Pending)
	obj := waitReady(t, manual)
	g.Expect(obj.Status.LastAppliedPlan).NotTo(BeEmpty())
	for _, tf := range long {
		g.Expect(get(g, tf).Status.LastAppliedRevision).To(BeEmpty(), "the approval was applied before the long applies ended")
	}
	for _, tf := range long {
		waitReady(t, tf)
	}
}

// A lock left by a runner Pod is released once the Pod is provably gone
// (deleted, or terminated) and never while it runs.
func TestLockOfARunnerPodIsReleasedOnlyWhenThePodIsGone(t *testing.T) {
	tests := []struct {
		name    string
		phase   corev1.PodPhase // "" : no Pod at all
		release bool
	}{
		{name: "deleted", release: true},
		{name: "failed", phase: corev1.PodFailed, release: true},
		{name: "running", phase: corev1.PodRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			ns := newNamespace(t)
			newGitRepository(t, ns, "repo", artifacts.publish(slowModule()))
			name := "pod-" + tt.name
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-runner-abcde"},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "runner", Image: "landform-runner:test"}}},
			}
			holder := statelock.Holder{Run: "run-old", Pod: &statelock.PodHolder{Namespace: ns, Name: pod.Name, UID: "uid-of-a-deleted-pod"}}
			if tt.phase != "" {
				g.Expect(k8sClient.Create(ctx, pod)).To(Succeed())
				pod.Status.Phase = tt.phase
				g.Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
				holder.Pod.UID = string(pod.UID)
			}
			leases := kubeClientset.CoordinationV1().Leases(ns)
			id, err := statelock.Acquire(ctx, leases, statelock.LeaseName("tfstate-default-"+name), holder, statelock.OperationApply)
			g.Expect(err).NotTo(HaveOccurred())

			path := effectPath(t)
			tf := newTerraform(t, ns, name, func(tf *infrav1.Terraform) { slow(tf, path, 0) })
			if tt.release {
				waitReady(t, tf)
				g.Expect(hasEvent(g, ns, name, infrav1.StateLockReleasedReason, id)).To(BeTrue())
				g.Expect(creates(path)).To(Equal(1))
				return
			}
			waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
				g.Expect(readyReasonOf(obj)).To(Equal(infrav1.StateLockedReason))
				g.Expect(obj.Status.Lock).NotTo(BeNil())
				g.Expect(obj.Status.Lock.Holder).To(ContainSubstring(pod.Name), "the condition names the holder")
			})
			g.Consistently(func(g Gomega) {
				l := stateLock(g, ns, name)
				g.Expect(l).NotTo(BeNil())
				g.Expect(l.ID).To(Equal(id))
			}, 5*time.Second, time.Second).Should(Succeed(), "a live runner keeps its lock")
			g.Expect(creates(path)).To(Equal(0))
		})
	}
}

// A reconcile request made while a run goes on is answered once that run
// ended, by a plan made after it (any reconcile request plans again), not
// by the run that began before it.
func TestAReconcileRequestDuringARunPlansAgain(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	tf, path := newSlowTerraform(t, ns, "asked", 3, 2*time.Second)
	g.Eventually(func() int { return creates(path) }, waitTimeout, pollEvery).Should(Equal(1), "the apply is under way")
	annotate(t, tf, meta.ReconcileRequestAnnotation, "during-the-apply")
	g.Expect(get(g, tf).Status.Run).NotTo(BeNil(), "asked while the apply ran")

	waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(obj.Status.LastHandledReconcileAt).To(Equal("during-the-apply"))
		g.Expect(conditions.IsReady(obj)).To(BeTrue())
		// Under approvePlan auto the first plan was applied at once, with
		// no plan event of its own: this one is the plan after the apply.
		g.Expect(hasEvent(g, ns, tf.Name, infrav1.PlannedNoChangesReason, "no changes")).To(BeTrue(), "planned again after the request")
	})
	g.Expect(creates(path)).To(Equal(1))
}
