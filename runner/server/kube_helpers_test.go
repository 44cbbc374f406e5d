package server

import (
	"context"
	"os/exec"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/testenv"
	"github.com/landform-dev/landform/internal/tfstate"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// kubeEnv is a real API server, started by the first test that needs the
// kubernetes backend: the other tests do not pay for it.
type kubeEnv struct {
	once sync.Once
	env  *testenv.Env
	err  error
}

var kube kubeEnv

func (k *kubeEnv) stop() {
	if k.env != nil {
		_ = k.env.Stop()
	}
}

// kubeState is one kubernetes backend state in a fresh namespace of the
// test API server.
type kubeState struct {
	namespace  string
	suffix     string
	kubeconfig string
	leases     coordinationv1client.LeaseInterface
	clientset  kubernetes.Interface
}

func newKubeState(t *testing.T, suffix string) *kubeState {
	t.Helper()
	kube.once.Do(func() { kube.env, kube.err = testenv.Start() })
	if kube.err != nil {
		t.Fatalf("the kubernetes backend tests need envtest (KUBEBUILDER_ASSETS or make tools): %v", kube.err)
	}
	env := kube.env
	ns := env.Namespace(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &kubeState{namespace: ns, suffix: suffix, kubeconfig: env.Kubeconfig(t), leases: cs.CoordinationV1().Leases(ns), clientset: cs}
}

// useBackend points spec at this state through the default backend.
func (k *kubeState) useBackend(spec *runnerpb.WorkspaceSpec) *runnerpb.WorkspaceSpec {
	spec.CustomBackend = ""
	spec.BackendConfig = map[string]string{"secret_suffix": k.suffix, "namespace": k.namespace, "config_path": k.kubeconfig}
	return spec
}

// state is the state the backend keeps in its Secret, gzip'd.
func (k *kubeState) state(t *testing.T, ctx context.Context) []byte {
	t.Helper()
	secret, err := k.clientset.CoreV1().Secrets(k.namespace).Get(ctx, statelock.StateSecretName("", k.suffix), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("state Secret: %v", err)
	}
	return secret.Data[tfstate.DataKey]
}

func (k *kubeState) leaseName() string {
	return statelock.LeaseName(statelock.StateSecretName("", k.suffix))
}

// lock reads the state lock; nil when free.
func (k *kubeState) lock(t *testing.T) *statelock.LockInfo {
	t.Helper()
	info, err := statelock.Read(context.Background(), k.leases, k.leaseName())
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// waitLocked waits until the state is locked and returns the lock.
func (k *kubeState) waitLocked(t *testing.T, timeout time.Duration) *statelock.LockInfo {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(100 * time.Millisecond) {
		if info := k.lock(t); info != nil {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("the state %s was not locked within %s", k.leaseName(), timeout)
		}
	}
}

// tofuModule writes module (with this state's backend) into a directory of
// its own and returns a function that runs real tofu there, after init.
func (k *kubeState) tofuModule(t *testing.T, module string) func(args ...string) *exec.Cmd {
	t.Helper()
	return testenv.TofuModule(t, enginePath, k.kubeconfig, k.namespace, k.suffix, module)
}

// writesSince counts the writes of obj, a Secret or Lease of k's
// namespace, after the version given: the API server's watch replays them
// from that resourceVersion.
func (k *kubeState) writesSince(t *testing.T, ctx context.Context, obj metav1.Object) int {
	t.Helper()
	opts := metav1.ListOptions{FieldSelector: "metadata.name=" + obj.GetName(), ResourceVersion: obj.GetResourceVersion()}
	var w watch.Interface
	var err error
	switch obj.(type) {
	case *corev1.Secret:
		w, err = k.clientset.CoreV1().Secrets(k.namespace).Watch(ctx, opts)
	case *coordinationv1.Lease:
		w, err = k.leases.Watch(ctx, opts)
	default:
		t.Fatalf("writesSince: %T", obj)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	n := 0
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return n
			}
			if ev.Type == watch.Modified || ev.Type == watch.Deleted {
				n++
			}
		case <-time.After(time.Second):
			// The replay comes at once; a second without one is its end.
			return n
		}
	}
}
