package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/owned"
	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/testenv"
)

// tofuBinary is the OpenTofu that `make tools` installs (or LANDFORM_TOFU).
func tofuBinary(t *testing.T) string {
	t.Helper()
	path := os.Getenv("LANDFORM_TOFU")
	if path == "" {
		path = filepath.Join(repoRoot(), "bin", "tofu")
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the unlock tests need OpenTofu at %s: run `make tools` or set LANDFORM_TOFU (%v)", path, err)
	}
	return path
}

// tofuWorkspace writes a module whose state is obj's, in the kubernetes
// backend as Landform configures it, and initialises it.
func tofuWorkspace(t *testing.T, obj *v1alpha1.Terraform) (run func(args ...string) *exec.Cmd) {
	t.Helper()
	return testenv.TofuModule(t, tofuBinary(t), kubeconfig(t), obj.Namespace, names.SecretSuffix(obj), `
resource "terraform_data" "slow" {
  provisioner "local-exec" {
    command = "sleep 300"
  }
}
`)
}

// lockWithTofu has the real backend take obj's state lock and leaves it
// held: tofu is killed mid-apply, as when a runner dies.
func lockWithTofu(t *testing.T, obj *v1alpha1.Terraform) func(args ...string) *exec.Cmd {
	t.Helper()
	run := tofuWorkspace(t, obj)
	apply := run("apply", "-auto-approve")
	if err := apply.Start(); err != nil {
		t.Fatal(err)
	}
	kill := func() {
		_ = syscall.Kill(-apply.Process.Pid, syscall.SIGKILL) // tofu and its sleep
		_ = apply.Wait()
	}
	defer kill()
	deadline := time.Now().Add(time.Minute)
	for {
		if l := lease(t, obj); l != nil && l.Spec.HolderIdentity != nil {
			return run
		}
		if time.Now().After(deadline) {
			t.Fatal("tofu did not take the lock")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lease is obj's state lock Lease; nil when there is none.
func lease(t *testing.T, obj *v1alpha1.Terraform) *coordinationv1.Lease {
	t.Helper()
	l := &coordinationv1.Lease{}
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: obj.Namespace, Name: names.StateLease(obj)}, l)
	if client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	if err != nil {
		return nil
	}
	return l
}

// setHolder rewrites the lock info's Who, as if another host held the lock.
func setHolder(t *testing.T, l *coordinationv1.Lease, who string) {
	t.Helper()
	var info map[string]any
	if err := json.Unmarshal([]byte(l.Annotations[lockInfoAnnotation]), &info); err != nil {
		t.Fatal(err)
	}
	info["Who"] = who
	data, _ := json.Marshal(info)
	l.Annotations[lockInfoAnnotation] = string(data)
	if err := env.Client.Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
}

// copyLease gives obj a lock held like l is: the Lease the backend writes.
func copyLease(t *testing.T, l *coordinationv1.Lease, obj *v1alpha1.Terraform) *coordinationv1.Lease {
	t.Helper()
	c := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: names.StateLease(obj), Labels: l.Labels, Annotations: l.Annotations},
		Spec:       *l.Spec.DeepCopy(),
	}
	c.Labels["tfstateSecretSuffix"] = names.SecretSuffix(obj)
	if err := env.Client.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return c
}

// pod creates a Pod in phase.
func pod(t *testing.T, ns, name string, labels map[string]string, phase corev1.PodPhase) {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "runner", Image: "landform-runner"}}},
	}
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = phase
	if err := env.Client.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// released checks that the lock is free as the backend leaves it after
// force-unlock: the Lease kept, without holder and lock info.
func released(t *testing.T, obj *v1alpha1.Terraform) {
	t.Helper()
	l := lease(t, obj)
	switch {
	case l == nil:
		t.Error("the Lease was deleted; force-unlock keeps it")
	case l.Spec.HolderIdentity != nil:
		t.Errorf("the lock is still held by %s", *l.Spec.HolderIdentity)
	case l.Annotations[lockInfoAnnotation] != "":
		t.Errorf("the lock info is still there: %s", l.Annotations[lockInfoAnnotation])
	}
}

func held(t *testing.T, obj *v1alpha1.Terraform) {
	t.Helper()
	if l := lease(t, obj); l == nil || l.Spec.HolderIdentity == nil {
		t.Error("the lock was released")
	}
}

// lockOutput hides what differs between runs: the lock id, the machine's
// user and hostname, times and ages.
func lockOutput(s, who string) string {
	s = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`).ReplaceAllString(s, "LOCK-ID")
	if who != "" {
		s = regexp.MustCompile(regexp.QuoteMeta(who)).ReplaceAllString(s, "USER@HOST")
		if _, host, ok := cutLast(who, "@"); ok && host != "" {
			s = regexp.MustCompile(regexp.QuoteMeta(host)).ReplaceAllString(s, "HOST")
		}
	}
	s = regexp.MustCompile(`\(\d+[smhd][0-9smhd]* ago\)`).ReplaceAllString(s, "(AGE ago)")
	return normalize(s)
}

func cutLast(s, sep string) (string, string, bool) {
	for i := len(s) - len(sep); i >= 0; i-- {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}

func TestUnlock(t *testing.T) {
	ns := namespace(t, "unlock")

	// A lock left by a runner Pod that is gone, taken by the real backend.
	gone := terraform(t, ns, "gone", states[objLocked])
	tofu := lockWithTofu(t, gone)
	realLease := lease(t, gone)
	setHolder(t, realLease, "landform@gone-runner-x7k2p")
	r := run(t, "", "unlock", "-n", ns, "gone")
	golden(t, "unlock/gone-runner", lockOutput(r.transcript(), ""))
	released(t, gone)
	// The backend takes and releases the lock again: the release is the real one.
	if out, err := tofu("plan", "-lock-timeout=0s").CombinedOutput(); err != nil {
		t.Fatalf("tofu plan after unlock: %v\n%s", err, out)
	}

	// A lock the CLI cannot prove abandoned: held from this machine.
	local := terraform(t, ns, "local", states[objLocked])
	tofu = lockWithTofu(t, local)
	var info lockInfo
	if err := json.Unmarshal([]byte(lease(t, local).Annotations[lockInfoAnnotation]), &info); err != nil {
		t.Fatal(err)
	}
	r = run(t, "", "unlock", "-n", ns, "local")
	golden(t, "unlock/unknown-holder", lockOutput(r.transcript(), info.Who))
	held(t, local)
	r = run(t, "", "unlock", "-n", ns, "local", "--force")
	golden(t, "unlock/unknown-holder-force", lockOutput(r.transcript(), info.Who))
	released(t, local)
	if out, err := tofu("plan", "-lock-timeout=0s").CombinedOutput(); err != nil {
		t.Fatalf("tofu plan after unlock --force: %v\n%s", err, out)
	}

	// Locks held like the backend holds them, by other holders.
	template := lease(t, gone)
	template.Annotations = map[string]string{lockInfoAnnotation: fmt.Sprintf(
		`{"ID":"0b8f3c2e-5d1a-4e6f-8a9b-1c2d3e4f5a6b","Operation":"OperationTypeApply","Info":"","Who":"landform@HOST","Version":"1.12.6","Created":%q,"Path":""}`,
		now.Add(-12*time.Minute).UTC().Format(time.RFC3339Nano))}
	template.Spec.HolderIdentity = ptr.To("0b8f3c2e-5d1a-4e6f-8a9b-1c2d3e4f5a6b")
	for _, tt := range []struct {
		name    string
		host    string
		pod     func(t *testing.T, obj *v1alpha1.Terraform) // creates the holder's Pod
		force   bool
		flags   []string
		release bool
	}{
		{name: "live-runner", host: "live-runner-a1b2c", pod: runnerPod(corev1.PodRunning)},
		{name: "live-runner-force", host: "live-runner-force-a1b2c", pod: runnerPod(corev1.PodRunning), force: true, release: true},
		// As docs/cli.md shows it: the runner Pod is gone.
		{name: "pod-gone", host: "pod-gone-runner-x7k2p", release: true},
		{name: "failed-runner", host: "failed-runner-a1b2c", pod: runnerPod(corev1.PodFailed), release: true},
		// --lock-id releases that lock only.
		{name: "lock-id", host: "lock-id-a1b2c", pod: runnerPod(corev1.PodFailed), flags: []string{"--lock-id", "0b8f3c2e-5d1a-4e6f-8a9b-1c2d3e4f5a6b", "-o", "json"}, release: true},
		{name: "other-lock-id", host: "other-lock-id-a1b2c", pod: runnerPod(corev1.PodFailed), flags: []string{"--lock-id", "6c1f0b7e-0d3a-4b8e-9c1a-2f4e5d6c7b8a"}},
		{name: "kept-yaml", host: "kept-yaml-a1b2c", pod: runnerPod(corev1.PodRunning), flags: []string{"-o", "yaml"}},
		{name: "other-pod", host: "other-pod-runner-a1b2c", pod: func(t *testing.T, obj *v1alpha1.Terraform) {
			pod(t, obj.Namespace, "other-pod-runner-a1b2c", map[string]string{"app": "something-else"}, corev1.PodRunning)
		}},
		{name: "no-host", host: ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := terraform(t, ns, tt.name, states[objLocked])
			l := copyLease(t, template, obj)
			setHolder(t, l, "landform@"+tt.host)
			if tt.pod != nil {
				tt.pod(t, obj)
			}
			args := []string{"unlock", "-n", ns, tt.name}
			if tt.force {
				args = append(args, "--force")
			}
			args = append(args, tt.flags...)
			// The lock's id and time are the template's: only the
			// timestamp differs from run to run.
			golden(t, "unlock/"+tt.name, normalize(run(t, "", args...).transcript()))
			if tt.release {
				released(t, obj)
			} else {
				held(t, obj)
			}
		})
	}

	// Locks taken by Landform runners carry the runner's identity: a runner
	// Pod that no longer exists, or a local process that exited, is gone;
	// a live local process is not.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	me, err := statelock.CurrentProcess()
	if err != nil {
		t.Fatal(err)
	}
	deadProc := *me
	deadProc.PID = dead.ProcessState.Pid()
	for _, tt := range []struct {
		name    string
		holder  statelock.Holder
		release bool
		says    string
	}{
		{name: "identity-pod-gone", holder: statelock.Holder{Run: "run-1", Pod: &statelock.PodHolder{Namespace: ns, Name: "identity-pod-gone-runner-zzzzz", UID: "uid-gone"}}, release: true, says: "gone: runner Pod identity-pod-gone-runner-zzzzz no longer exists"},
		// A Pod elsewhere is no runner of the object, however gone: kept.
		{name: "identity-pod-elsewhere", holder: statelock.Holder{Run: "run-4", Pod: &statelock.PodHolder{Namespace: "elsewhere", Name: "identity-pod-elsewhere-runner-zzzzz", UID: "uid-gone"}}, says: "outside " + ns},
		{name: "identity-process-gone", holder: statelock.Holder{Run: "run-2", Process: &deadProc}, release: true, says: "no longer exists"},
		{name: "identity-process-alive", holder: statelock.Holder{Run: "run-3", Process: me}, says: "may still run"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := terraform(t, ns, tt.name, states[objLocked])
			l := template.DeepCopy()
			l.Annotations = map[string]string{lockInfoAnnotation: fmt.Sprintf(
				`{"ID":"0b8f3c2e-5d1a-4e6f-8a9b-1c2d3e4f5a6b","Operation":"OperationTypeApply","Info":%q,"Who":%q,"Created":%q}`,
				statelock.EncodeHolder(tt.holder), tt.holder.Who(), now.UTC().Format(time.RFC3339Nano))}
			copyLease(t, l, obj)
			out := run(t, "", "unlock", "-n", ns, tt.name).transcript()
			if !strings.Contains(out, tt.says) {
				t.Errorf("unlock says:\n%s\nwant %q", out, tt.says)
			}
			if tt.release {
				released(t, obj)
			} else {
				held(t, obj)
			}
		})
	}

	t.Run("not-locked", func(t *testing.T) {
		// gone's lock was released above; new never had one.
		terraform(t, ns, objNew, nil)
		golden(t, "unlock/not-locked", run(t, "", "unlock", "-n", ns, "gone").transcript())
		golden(t, "unlock/no-lease", run(t, "", "unlock", "-n", ns, objNew).transcript())
		golden(t, "unlock/not-locked-json", run(t, "", "unlock", "-n", ns, objNew, "--lock-id", "6c1f0b7e-0d3a-4b8e-9c1a-2f4e5d6c7b8a", "-o", "json").transcript())
	})
	t.Run("custom-backend", func(t *testing.T) {
		terraform(t, ns, "custom", func(obj *v1alpha1.Terraform) {
			obj.Spec.BackendConfig = &v1alpha1.BackendConfig{CustomConfiguration: `terraform { backend "s3" {} }`}
		})
		golden(t, "unlock/custom-backend", run(t, "", "unlock", "-n", ns, "custom").transcript())
	})
	t.Run("forbidden", func(t *testing.T) {
		grant(t, ns, "viewer", rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"terraforms"}, Verbs: []string{"get"}})
		golden(t, "unlock/forbidden", run(t, "", "unlock", "-n", ns, "local", "--as", "viewer").transcript())
	})
}

// runnerPod creates the holder's Pod, <object>-a1b2c, labelled as a runner
// Pod of obj, in phase.
func runnerPod(phase corev1.PodPhase) func(t *testing.T, obj *v1alpha1.Terraform) {
	return func(t *testing.T, obj *v1alpha1.Terraform) {
		labels := owned.Labels(obj)
		labels[nameLabel] = runnerPodName
		pod(t, obj.Namespace, obj.Name+"-a1b2c", labels, phase)
	}
}

func TestIsRunnerHost(t *testing.T) {
	a := strings.Repeat
	for _, tt := range []struct {
		host, name string
		want       bool
	}{
		{"db-runner-x7k2p", "db", true},
		{"db-runner-", "db", false},
		{"db-runner-x7k2", "db", false},
		{"db-x7k2p", "db", false},
		{"laptop", "db", false},
		{"dbx-runner-x7k2p", "db", false},
		{"db-eu-runner-x7k2p", "db.eu", true},
		// Names are cut to 50 characters so that the Pod name is a DNS label.
		{a("a", 50) + "-runner-x7k2p", a("a", 60), true},
		{a("a", 60) + "-runner-x7k2p", a("a", 60), false},
		{a("a", 48) + "-runner-x7k2p", a("a", 48) + "--b", true},
	} {
		obj := &v1alpha1.Terraform{ObjectMeta: metav1.ObjectMeta{Name: tt.name}}
		if got := isRunnerHost(tt.host, obj); got != tt.want {
			t.Errorf("isRunnerHost(%q, %q) = %v, want %v", tt.host, tt.name, got, tt.want)
		}
	}
}
