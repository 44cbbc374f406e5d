package placement

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/certs"
	"github.com/landform-dev/landform/internal/fakekubelet"
	"github.com/landform-dev/landform/internal/mtls"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/runner"
)

// slowModule applies for a minute, to stop or kill its runner mid-apply.
var slowModule = map[string]string{"main.tf": `
resource "terraform_data" "slow" {
  provisioner "local-exec" {
    command = "exec sleep 60"
  }
}
`}

func newTerraform(t *testing.T, namespace, name string, mutate func(*infrav1.Terraform)) *infrav1.Terraform {
	t.Helper()
	obj := &infrav1.Terraform{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       infrav1.TerraformSpec{SourceRef: infrav1.SourceReference{Kind: "GitRepository", Name: "infra"}},
	}
	if mutate != nil {
		mutate(obj)
	}
	if err := env.Client.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// startRun starts a runner Pod for obj and stops it when the test ends.
func startRun(t *testing.T, ctx context.Context, p *Pod, obj *infrav1.Terraform) *Run {
	t.Helper()
	rn, err := p.Start(ctx, obj, "run-1")
	if err != nil {
		t.Fatalf("starting a runner Pod: %v", err)
	}
	t.Cleanup(func() { _ = rn.Stop() })
	return rn
}

// onlyPod returns the one runner Pod in namespace.
func onlyPod(t *testing.T, namespace string) corev1.Pod {
	t.Helper()
	pods := runnerPods(t, namespace)
	if len(pods) != 1 {
		t.Fatalf("%d runner Pods in %s, want 1", len(pods), namespace)
	}
	return pods[0]
}

func wantPlacementError(t *testing.T, err error, reason string) *Error {
	t.Helper()
	var perr *Error
	if !errors.As(err, &perr) {
		t.Fatalf("want a placement error with reason %s, got %v", reason, err)
	}
	if perr.Reason != reason {
		t.Fatalf("reason %s, want %s (message: %s)", perr.Reason, reason, perr.Message)
	}
	return perr
}

// runnerStarts is the number of runner starts recorded for placement.
func runnerStarts(t *testing.T, placement string) uint64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "landform_runner_start_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "placement" && l.GetValue() == placement {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

// TestPodRun runs the whole Pod path: the ServiceAccount check, the
// namespace's certificate Secret, the Pod, the wait, mTLS, a plan and an
// apply with the state in the namespace, and the Pod's end: its runner,
// asked to exit, exits 0, and the terminated Pod is deleted at once.
func TestPodRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := runnerNamespace(t, true)
	obj := newTerraform(t, ns, "files", nil)
	starts := runnerStarts(t, "pod")

	rn, err := newPodPlacer().Start(ctx, obj, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if got := runnerStarts(t, "pod"); got <= starts {
		t.Fatalf("runner start latency not recorded (%d observations, %d before)", got, starts)
	}
	if rn.KeptOnStop {
		t.Fatal("a runner Pod without reuse is said to be kept when stopped")
	}
	if want := map[string]string{"in_cluster_config": "true"}; !maps.Equal(rn.Backend, want) {
		t.Fatalf("backend %v, want %v", rn.Backend, want)
	}
	pod := onlyPod(t, ns)
	if !strings.HasPrefix(pod.Name, "files-runner-") {
		t.Fatalf("Pod name %s", pod.Name)
	}
	wantLabels := map[string]string{
		"app.kubernetes.io/name":       "landform-runner",
		"app.kubernetes.io/managed-by": "landform",
		"infra.landform.dev/terraform": "files",
		"infra.landform.dev/run":       "run-1",
	}
	if d := cmp.Diff(wantLabels, pod.Labels); d != "" {
		t.Fatalf("labels (-want +got):\n%s", d)
	}
	wantOwner := []metav1.OwnerReference{{
		APIVersion: "infra.landform.dev/v1alpha1", Kind: "Terraform", Name: "files", UID: obj.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	if d := cmp.Diff(wantOwner, pod.OwnerReferences); d != "" {
		t.Fatalf("owner references (-want +got):\n%s", d)
	}
	if pod.Spec.ServiceAccountName != "landform-runner" {
		t.Fatalf("service account %q", pod.Spec.ServiceAccountName)
	}

	target := filepath.Join(t.TempDir(), "hello.txt")
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	tb := moduleTarball(t, filepath.Join(root, "modules", "file"), nil)
	spec := workspaceSpec(t, obj, tb, map[string]any{"path": target, "content": "hello from a runner Pod"})
	if err := rn.Client.UploadWorkspace(ctx, spec, bytes.NewReader(tb.data)); err != nil {
		t.Fatal(err)
	}
	plan, err := runnerClient(rn).Plan(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Result.GetAdd() != 1 || !plan.Result.GetHasChanges() {
		t.Fatalf("plan %+v", plan.Result)
	}
	outs, err := runnerClient(rn).Apply(ctx, plan.PlanFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(target); err != nil || string(got) != "hello from a runner Pod" {
		t.Fatalf("applied file: %q, %v", got, err)
	}
	var path string
	for _, o := range outs {
		if o.GetName() == "path" {
			path = string(o.GetValueJson())
		}
	}
	if path != strconv.Quote(target) {
		t.Fatalf("output path %s, want %q", path, target)
	}
	var state corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.StateSecret(obj)}, &state); err != nil {
		t.Fatalf("state Secret: %v", err)
	}

	stopExited(t, rn, pod)
}

// TestPodRunKeptOnStop: with reuse, stopping a run keeps its Pod, and the
// run says so (its stop is waited for); not for an object being deleted.
func TestPodRunKeptOnStop(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := runnerNamespace(t, true)
	p := newPodPlacer()
	p.ReuseFor(time.Minute)
	defer p.EndKept(logr.Discard())
	obj := newTerraform(t, ns, "kept", nil)
	if rn := startRun(t, ctx, p, obj); !rn.KeptOnStop {
		t.Fatal("a runner Pod with reuse is not said to be kept when stopped")
	}
	deleting := obj.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	if rn := startRun(t, ctx, p, deleting); rn.KeptOnStop {
		t.Fatal("the runner Pod of an object being deleted is said to be kept when stopped")
	}
}

// stopExited stops rn and checks its Pod's end: the runner exits 0 when
// asked and the Pod is deleted once terminated, without a grace period
// (only a Pod that terminated, or never ran, is: the kubelet had nothing
// to stop).
func stopExited(t *testing.T, rn *Run, pod corev1.Pod) {
	t.Helper()
	if err := rn.Stop(); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the runner Pod to be gone", func() bool { return len(allPods(t, pod.Namespace)) == 0 })
	if exited, err := fake.RunnerExited(pod.Namespace, pod.Name); !exited || err != nil {
		t.Fatalf("runner exited %t (%v): want it to exit 0 when asked", exited, err)
	}
	if grace := fake.DeletionGrace(pod.Namespace, pod.Name); grace != nil {
		t.Fatalf("Pod deleted gracefully (%ds): want it deleted once terminated", *grace)
	}
}

// TestPodStoppedWhileBusy: a runner with a run in progress does not exit
// when asked; its Pod is deleted with its grace period (the runner's grace
// and the slack), the runner interrupts terraform and exits cleanly on
// SIGTERM.
func TestPodStoppedWhileBusy(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := runnerNamespace(t, true)
	obj := newTerraform(t, ns, "busy", nil)
	rn := startRun(t, ctx, newPodPlacer(), obj)
	pod := onlyPod(t, ns)
	applied := applySlowly(t, ctx, ctx, rn, obj)

	if err := rn.Stop(); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the runner Pod to be gone", func() bool { return len(allPods(t, ns)) == 0 })
	grace := fake.DeletionGrace(ns, pod.Name)
	if grace == nil || *grace != *pod.Spec.TerminationGracePeriodSeconds || *grace != 25 {
		got := "none"
		if grace != nil {
			got = strconv.FormatInt(*grace, 10) + "s"
		}
		t.Fatalf("Pod deleted with grace %s, want its terminationGracePeriodSeconds %d = runner grace 10s + 15s", got, *pod.Spec.TerminationGracePeriodSeconds)
	}
	if exited, err := fake.RunnerExited(ns, pod.Name); !exited || err != nil {
		t.Fatalf("runner exited %t (%v): want a clean exit on SIGTERM", exited, err)
	}
	if err := <-applied; err == nil {
		t.Fatal("the apply of a stopped runner succeeded")
	}
}

// applySlowly starts the slow module's apply and returns once terraform
// runs the provisioner, with a channel that gets the apply's result.
func applySlowly(t *testing.T, ctx, applyCtx context.Context, rn *Run, obj *infrav1.Terraform) <-chan error {
	t.Helper()
	tb := moduleTarball(t, "", slowModule)
	if err := rn.Client.UploadWorkspace(ctx, workspaceSpec(t, obj, tb, map[string]any{}), bytes.NewReader(tb.data)); err != nil {
		t.Fatal(err)
	}
	plan, err := runnerClient(rn).Plan(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	executing := make(chan struct{})
	var once sync.Once
	applied := make(chan error, 1)
	go func() {
		_, err := runnerClient(rn).Apply(applyCtx, plan.PlanFile, func(line string) {
			if strings.Contains(line, "Executing:") {
				once.Do(func() { close(executing) })
			}
		})
		applied <- err
	}()
	select {
	case <-executing:
	case err := <-applied:
		t.Fatalf("apply ended before its provisioner ran: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the provisioner did not start within 2m")
	}
	return applied
}

// TestPodKilledMidRun: a runner Pod that vanishes during an apply (deleted
// at once, its process killed) fails the call promptly; nothing hangs.
func TestPodKilledMidRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := runnerNamespace(t, true)
	obj := newTerraform(t, ns, "killed", nil)
	rn := startRun(t, ctx, newPodPlacer(), obj)
	pod := onlyPod(t, ns)
	applied := applySlowly(t, ctx, ctx, rn, obj)

	killed := time.Now()
	if err := env.Client.Delete(ctx, &pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-applied:
		if err == nil {
			t.Fatal("apply succeeded on a killed runner")
		}
		t.Logf("apply failed %s after the kill: %v", time.Since(killed).Round(time.Millisecond), err)
	case <-time.After(15 * time.Second):
		t.Fatal("apply still running 15s after its runner Pod was killed")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- rn.Stop() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("stopping a run whose Pod is gone: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stop hangs on a run whose Pod is gone")
	}
}

// TestPodStoppedMidRun is the controller shutting down during an apply:
// the call's context ends, the runner interrupts terraform, the Pod is
// deleted with its grace period, the runner exits by itself, and the
// state lock is free for the next run.
func TestPodStoppedMidRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := runnerNamespace(t, true)
	obj := newTerraform(t, ns, "stopped", nil)
	p := newPodPlacer()
	rn := startRun(t, ctx, p, obj)
	pod := onlyPod(t, ns)
	applyCtx, stopManager := context.WithCancel(ctx)
	applied := applySlowly(t, ctx, applyCtx, rn, obj)

	stopManager()
	select {
	case err := <-applied:
		if err == nil {
			t.Fatal("a cancelled apply succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("apply still running 10s after its context ended")
	}
	if err := rn.Stop(); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the runner Pod to be gone", func() bool { return len(allPods(t, ns)) == 0 })
	if exited, err := fake.RunnerExited(ns, pod.Name); !exited || err != nil {
		t.Fatalf("runner exited %t (%v): want a clean exit within its grace", exited, err)
	}

	next := startRun(t, ctx, p, obj)
	tb := moduleTarball(t, "", slowModule)
	if err := next.Client.UploadWorkspace(ctx, workspaceSpec(t, obj, tb, map[string]any{}), bytes.NewReader(tb.data)); err != nil {
		t.Fatal(err)
	}
	if _, err := runnerClient(next).Plan(ctx, false, nil); err != nil {
		t.Fatalf("the next run cannot plan, is the lock left behind? %v", err)
	}
}

func TestPodNeverStarts(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		t.Run("keep pods "+strconv.FormatBool(keep), func(t *testing.T) {
			t.Parallel()
			ns := runnerNamespace(t, true)
			fake.Set(ns, fakekubelet.Unschedulable)
			obj := newTerraform(t, ns, "stuck", nil)
			p := newPodPlacer()
			p.StartTimeout = 2 * time.Second
			p.KeepPods = keep
			started := time.Now()
			_, err := p.Start(context.Background(), obj, "run-1")
			perr := wantPlacementError(t, err, infrav1.RunnerStartTimeoutReason)
			if d := time.Since(started); d > 10*time.Second {
				t.Fatalf("start gave up after %s, StartTimeout is 2s", d)
			}
			names := fake.CreatedIn(ns)
			if len(names) != 1 {
				t.Fatalf("Pods created: %v", names)
			}
			for _, want := range []string{names[0], "did not start within 2s", "PodScheduled=False Unschedulable: 0/1 nodes are available: 1 Insufficient cpu."} {
				if !strings.Contains(perr.Message, want) {
					t.Fatalf("message %q does not contain %q", perr.Message, want)
				}
			}
			if keep {
				if !strings.Contains(perr.Message, "kept") {
					t.Fatalf("message %q does not say the Pod is kept", perr.Message)
				}
				time.Sleep(time.Second)
				if len(allPods(t, ns)) != 1 {
					t.Fatal("the Pod was not kept")
				}
				return
			}
			eventually(t, 10*time.Second, "the stuck Pod to be deleted", func() bool { return len(allPods(t, ns)) == 0 })
		})
	}
}

// A runner image the node cannot pull fails the run at once with the
// image and the kubelet's reason, not after the start timeout, and the Pod
// is removed.
func TestPodImageCannotBePulled(t *testing.T) {
	t.Parallel()
	ns := runnerNamespace(t, true)
	fake.Set(ns, fakekubelet.ImageMissing)
	obj := newTerraform(t, ns, "badimage", nil)
	p := newPodPlacer()
	p.StartTimeout = time.Minute
	started := time.Now()
	_, err := p.Start(context.Background(), obj, "run-1")
	perr := wantPlacementError(t, err, infrav1.RunnerFailedReason)
	if d := time.Since(started); d > 30*time.Second {
		t.Fatalf("start gave up after %s: it should not wait for the 1m start timeout", d)
	}
	names := fake.CreatedIn(ns)
	if len(names) != 1 {
		t.Fatalf("Pods created: %v, want one (a second would not pull either)", names)
	}
	for _, want := range []string{names[0], "cannot be pulled", "ImagePullBackOff", "spec.runnerPodTemplate.spec.image"} {
		if !strings.Contains(perr.Message, want) {
			t.Fatalf("message %q does not contain %q", perr.Message, want)
		}
	}
	eventually(t, 10*time.Second, "the Pod to be deleted", func() bool { return len(allPods(t, ns)) == 0 })
}

func TestPodFailedBeforeRunning(t *testing.T) {
	t.Parallel()
	t.Run("replaced once", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ns := runnerNamespace(t, true)
		fake.Set(ns, fakekubelet.FailFirst)
		obj := newTerraform(t, ns, "flaky", nil)
		rn := startRun(t, ctx, newPodPlacer(), obj)
		if _, err := rn.Client.Outputs(ctx); !runner.IsReason(err, runner.ReasonNoWorkspace) {
			// A fresh runner has no workspace yet: its typed answer
			// proves the connection works.
			t.Fatalf("want the runner to answer that it has no workspace, got %v", err)
		}
		names := fake.CreatedIn(ns)
		if len(names) != 2 {
			t.Fatalf("Pods created: %v, want the failed one and its replacement", names)
		}
		eventually(t, 10*time.Second, "the failed Pod to be deleted", func() bool {
			pods := allPods(t, ns)
			return len(pods) == 1 && pods[0].Name == names[1]
		})
	})
	t.Run("failing again", func(t *testing.T) {
		t.Parallel()
		ns := runnerNamespace(t, true)
		fake.Set(ns, fakekubelet.FailAlways)
		obj := newTerraform(t, ns, "broken", nil)
		_, err := newPodPlacer().Start(context.Background(), obj, "run-1")
		perr := wantPlacementError(t, err, infrav1.RunnerFailedReason)
		names := fake.CreatedIn(ns)
		if len(names) != 2 {
			t.Fatalf("Pods created: %v, want two attempts", names)
		}
		for _, want := range []string{names[0], names[1], "exit code 1", "boom: the runner could not start"} {
			if !strings.Contains(perr.Message, want) {
				t.Fatalf("message %q does not contain %q", perr.Message, want)
			}
		}
		eventually(t, 10*time.Second, "the failed Pods to be deleted", func() bool { return len(allPods(t, ns)) == 0 })
	})
}

func TestServiceAccountMissing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		account string
	}{
		{name: "default account", account: ""},
		{name: "named account", account: "deployer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ns := runnerNamespace(t, false)
			obj := newTerraform(t, ns, "orphan", func(o *infrav1.Terraform) { o.Spec.ServiceAccountName = tt.account })
			_, err := newPodPlacer().Start(context.Background(), obj, "run-1")
			perr := wantPlacementError(t, err, infrav1.RunnerServiceAccountMissingReason)
			sa := obj.GetServiceAccountName()
			for _, want := range []string{"ServiceAccount " + ns + "/" + sa + " does not exist", "kubectl create serviceaccount " + sa + " -n " + ns, "runner namespaces"} {
				if !strings.Contains(perr.Message, want) {
					t.Fatalf("message %q does not contain %q", perr.Message, want)
				}
			}
			if names := fake.CreatedIn(ns); len(names) != 0 {
				t.Fatalf("Pods created without a ServiceAccount: %v", names)
			}
		})
	}
}

// TestRunnerRefusesOtherClients: only the controller's certificate gets an
// answer from a runner Pod.
func TestRunnerRefusesOtherClients(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := runnerNamespace(t, true)
	obj := newTerraform(t, ns, "guarded", nil)
	startRun(t, ctx, newPodPlacer(), obj)
	pod := onlyPod(t, ns)
	addr := net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port))

	var caSecret, leafSecret corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: controllerNS, Name: certs.CASecretName}, &caSecret); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: certs.RunnerSecretName}, &leafSecret); err != nil {
		t.Fatal(err)
	}
	ca, err := mtls.LoadCA(caSecret.Data[corev1.TLSCertKey], caSecret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	other, err := mtls.NewCA("landform-runner-ca-other", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	clientConfig := func(t *testing.T, certPEM, keyPEM []byte) *tls.Config {
		t.Helper()
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(ca.CertPEM())
		cfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: roots, ServerName: certs.ServerName(ns)}
		if certPEM != nil {
			pair, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				t.Fatal(err)
			}
			// Presented whatever CAs the runner names.
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
		}
		return cfg
	}
	issue := func(ca *mtls.CA, cn string) (certPEM, keyPEM []byte) {
		c, k, err := ca.IssueClient(cn, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return c, k
	}
	controllerCert, controllerKey := issue(ca, certs.ControllerName)
	otherCert, otherKey := issue(other, certs.ControllerName)
	strangerCert, strangerKey := issue(ca, "landform-stranger")
	tests := []struct {
		name      string
		cert, key []byte
		refused   bool
	}{
		{name: "the controller's certificate", cert: controllerCert, key: controllerKey},
		{name: "no client certificate", refused: true},
		{name: "a certificate of another CA", cert: otherCert, key: otherKey, refused: true},
		{name: "the namespace's runner certificate", cert: leafSecret.Data[corev1.TLSCertKey], key: leafSecret.Data[corev1.TLSPrivateKeyKey], refused: true},
		{name: "a certificate of the CA for another name", cert: strangerCert, key: strangerKey, refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dialCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			c, err := runner.Dial(dialCtx, addr, clientConfig(t, tt.cert, tt.key))
			if !tt.refused {
				if err != nil {
					t.Fatalf("the controller's certificate was refused: %v", err)
				}
				c.Close()
				return
			}
			// The first case shows the address is right, so a failure
			// here is the refusal (an alert, or the connection closed).
			if err == nil {
				c.Close()
				t.Fatal("the runner answered")
			}
		})
	}
}

// TestNamespaceSecretRecreated: a namespace deleted and created again loses
// its runner Secret (envtest has no namespace controller, so the Secret is
// deleted instead); the next start writes a new one.
func TestNamespaceSecretRecreated(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := runnerNamespace(t, true)
	obj := newTerraform(t, ns, "again", nil)
	p := newPodPlacer()
	if err := startRun(t, ctx, p, obj).Stop(); err != nil {
		t.Fatal(err)
	}
	var old corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: certs.RunnerSecretName}, &old); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, &old); err != nil {
		t.Fatal(err)
	}
	rn := startRun(t, ctx, p, obj)
	if _, err := rn.Client.Outputs(ctx); !runner.IsReason(err, runner.ReasonNoWorkspace) {
		t.Fatalf("want the runner to answer that it has no workspace, got %v", err)
	}
	var s corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: certs.RunnerSecretName}, &s); err != nil {
		t.Fatal(err)
	}
	if s.UID == old.UID {
		t.Fatal("the runner Secret was not created again")
	}
}

// TestLeftoverPodsDeleted: runner Pods of the object left by an earlier
// controller (here: kept) are deleted when its next run starts.
func TestLeftoverPodsDeleted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := runnerNamespace(t, true)
	obj := newTerraform(t, ns, "leftover", nil)
	other := newTerraform(t, ns, "neighbour", nil)
	keeper := newPodPlacer()
	keeper.KeepPods = true
	if err := startRun(t, ctx, keeper, obj).Stop(); err != nil {
		t.Fatal(err)
	}
	if err := startRun(t, ctx, keeper, other).Stop(); err != nil {
		t.Fatal(err)
	}
	kept := runnerPods(t, ns)
	if len(kept) != 2 {
		t.Fatalf("%d Pods kept, want 2", len(kept))
	}
	rn := startRun(t, ctx, newPodPlacer(), obj)
	eventually(t, time.Minute, "the leftover Pod to be deleted", func() bool { return len(allPods(t, ns)) == 2 })
	names := map[string]bool{}
	for _, p := range runnerPods(t, ns) {
		names[p.Name] = true
	}
	for _, k := range kept {
		if want := k.Labels["infra.landform.dev/terraform"] == "neighbour"; names[k.Name] != want {
			t.Fatalf("Pod %s of %s present %t, want %t", k.Name, k.Labels["infra.landform.dev/terraform"], names[k.Name], want)
		}
	}
	_ = rn
}

// runnerClient is rn's client with the convenience calls of *runner.Client
// (Plan, Apply) that the controller does not use.
func runnerClient(rn *Run) *runner.Client { return rn.Client.(*runner.Client) }

// A runner Pod is seen through a watch: its start when the API server
// reports it, not at the next poll (polls here are an hour apart), and
// neither the wait for it to run nor the wait for its end after its
// runner exited reads the Pod: the watch's events carry it.
func TestPodSeenThroughTheWatch(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := runnerNamespace(t, true)
	obj := newTerraform(t, ns, "watched", nil)
	watching, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	counted := &podReadCounter{WithWatch: watching}
	p := newPodPlacer()
	p.Client = counted
	p.poll = &wait.Backoff{Duration: time.Hour, Factor: 1, Steps: math.MaxInt32}

	rn, err := p.Start(ctx, obj, "run-1")
	if err != nil {
		t.Fatalf("the start was not seen through the watch: %v", err)
	}
	pod := onlyPod(t, ns)
	if pod.Status.Phase != corev1.PodRunning {
		t.Fatalf("Start returned with the Pod %s", pod.Status.Phase)
	}
	stopExited(t, rn, pod)
	if n := counted.reads.Load(); n != 0 {
		t.Fatalf("the runner Pod was read %d times: want every wait served by its watch", n)
	}
}

// podReadCounter counts the Pods read through it.
type podReadCounter struct {
	client.WithWatch
	reads atomic.Int64
}

func (c *podReadCounter) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Pod); ok {
		c.reads.Add(1)
	}
	return c.WithWatch.Get(ctx, key, obj, opts...)
}
