// Package fakekubelet plays the kubelet for Landform's runner Pods in
// tests: it starts the real landform-runner binary for each runner Pod
// (volumes materialised in a directory, listening on the Pod's own loopback
// IP 127.0.0.N, downward API and Secret keys in its environment resolved),
// reports it Running with that IP, SIGTERMs it on graceful deletion and
// kills it after the grace period or at once, and reports the Pod
// terminated when its runner exits.
// The runner processes are children of the test, not of the controller
// under test, as in a cluster.
//
// With Options.APIServer, a runner Pod also gets the in-cluster view of
// that API server (KUBERNETES_SERVICE_HOST/PORT and its ServiceAccount's
// token and CA at /var/run/secrets/kubernetes.io/serviceaccount, in a
// mount namespace of its own), so the kubernetes backend's
// in_cluster_config works as in a cluster, and its runner is process 1 of
// a PID namespace of its own, so that killing it kills everything in the
// "container". See CheckInCluster. Without it, killing a Pod kills its
// runner's process group: terraform (in a group of its own) dies with its
// parent, but what terraform started may outlive it.
//
// The package is for Linux test machines.
package fakekubelet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// What runner Pods look like (internal/placement/pod_spec.go).
const (
	nameLabel       = "app.kubernetes.io/name"
	runnerPodValue  = "landform-runner"
	runnerContainer = "runner"
)

// Options configure a Kubelet.
type Options struct {
	// Client reaches the API server: Pods (and their status and binding),
	// the Secrets of their volumes and environment, ServiceAccount tokens.
	Client client.Client
	// Namespace, when set, is the only namespace whose Pods the kubelet
	// runs: a suite where other tests' runner Pods must never start (there
	// is no kubelet for them) runs one for a test's namespace.
	Namespace string
	// RunnerBinary is the landform-runner binary every runner Pod runs.
	RunnerBinary string
	// Path is the runners' PATH: the engine's directory first, as in the
	// runner image.
	Path string
	// Dir holds the Pods' files (volumes, service account); each Pod's are
	// removed when its runner exits.
	Dir string
	// Image maps paths inside the runner image (a provider mirror) to host
	// paths.
	Image map[string]string
	// Logs gets the runners' output and the kubelet's complaints; nil
	// discards them.
	Logs io.Writer
	// APIServer, when set, is the API server runner Pods see as
	// in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT name
	// it, and a token of the Pod's ServiceAccount (bound to the Pod, as the
	// kubelet's projected token) and the server's CA are at
	// /var/run/secrets/kubernetes.io/serviceaccount in the runner's own
	// mount namespace; the runner is then also process 1 of its own PID
	// namespace, its "container". Only Host and the CA (CAData or CAFile)
	// are used. CheckInCluster says whether this machine allows it.
	APIServer *rest.Config
}

// Kubelet plays the kubelet for runner Pods: for each Pod the placer
// creates it binds the Pod to a node, materialises its volumes (the TLS
// Secret, emptyDirs) in a directory, starts the real runner binary with the
// Pod's arguments and environment (mount paths mapped to that directory,
// the downward API and secretKeyRefs resolved, listening on the Pod's own
// loopback IP 127.0.0.N), and reports the Pod Running with that IP. A
// deleted Pod gets SIGTERM and, after its grace period, SIGKILL, and is
// then removed as the kubelet does; a runner that exits by itself leaves
// its Pod Succeeded or Failed. Namespaces can be told to misbehave instead
// (see Behaviour).
type Kubelet struct {
	c         client.Client
	namespace string
	runnerBin string
	path      string
	logs      io.Writer
	dir       string
	image     map[string]string
	apiServer *rest.Config

	mu         sync.Mutex
	ctx        context.Context // Run's
	behaviours map[string]Behaviour
	pods       map[types.UID]*fakePod
	created    map[string][]string // namespace: Pod names, in creation order
	nextIP     int
}

// Behaviour is how the kubelet treats a namespace's Pods.
type Behaviour int

const (
	// RunPods starts the runner.
	RunPods Behaviour = iota
	// Unschedulable leaves Pods Pending, as a scheduler that finds no node.
	Unschedulable
	// FailFirst fails the namespace's first Pod before it runs and runs
	// the others.
	FailFirst
	// FailAlways fails every Pod before it runs.
	FailAlways
	// ImageMissing leaves Pods Pending with the runner container waiting
	// in ImagePullBackOff, as a kubelet that cannot pull the image.
	ImageMissing
)

// fakePod is a Pod the kubelet handles.
type fakePod struct {
	namespace, name string
	uid             types.UID
	ip              string
	image           string
	cmd             *exec.Cmd
	// exited is closed once the runner has exited (exitErr says how), and
	// reported once its Pod's status says so.
	exited   chan struct{}
	exitErr  error
	reported chan struct{}
	// deletionGrace is the grace period the Pod was deleted with; nil
	// until it is deleted gracefully.
	deletionGrace *int64
	terminating   bool
	killed        bool
	// lost: Kill killed the runner, as a node losing the container.
	lost bool
}

// New returns a kubelet for the runner Pods o.Client sees. Run starts it.
func New(o Options) *Kubelet {
	logs := o.Logs
	if logs == nil {
		logs = io.Discard
	}
	return &Kubelet{
		c: o.Client, namespace: o.Namespace, runnerBin: o.RunnerBinary, path: o.Path, dir: o.Dir, image: o.Image, logs: logs, apiServer: o.APIServer,
		ctx:        context.Background(),
		behaviours: map[string]Behaviour{},
		pods:       map[types.UID]*fakePod{},
		created:    map[string][]string{},
		nextIP:     1,
	}
}

// Set changes how the kubelet treats Pods in namespace.
func (k *Kubelet) Set(namespace string, b Behaviour) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.behaviours[namespace] = b
}

// CreatedIn returns the names of the runner Pods seen in namespace.
func (k *Kubelet) CreatedIn(namespace string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.created[namespace]...)
}

// find returns the Pod namespace/name; nil if the kubelet never saw it.
// The caller holds k.mu.
func (k *Kubelet) find(namespace, name string) *fakePod {
	for _, p := range k.pods {
		if p.namespace == namespace && p.name == name {
			return p
		}
	}
	return nil
}

// DeletionGrace is the grace period namespace/name was deleted with; nil
// if it was not deleted gracefully. A Pod the API server deletes at once
// (terminated or never bound) is first written with a deletion timestamp
// and a grace of 0, then removed: a poll that catches it between the two
// saw no graceful deletion, and is reported so.
func (k *Kubelet) DeletionGrace(namespace, name string) *int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p := k.find(namespace, name); p != nil && p.deletionGrace != nil && *p.deletionGrace > 0 {
		return p.deletionGrace
	}
	return nil
}

// RunnerPID is the process id of the runner of Pod namespace/name; 0 if
// it never started.
func (k *Kubelet) RunnerPID(namespace, name string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p := k.find(namespace, name); p != nil && p.cmd != nil {
		return p.cmd.Process.Pid
	}
	return 0
}

// RunnerExited says whether the runner of namespace/name has exited, and
// how.
func (k *Kubelet) RunnerExited(namespace, name string) (bool, error) {
	k.mu.Lock()
	fp := k.find(namespace, name)
	var exited chan struct{}
	if fp != nil {
		exited = fp.exited
	}
	k.mu.Unlock()
	if exited == nil {
		return false, nil
	}
	select {
	case <-exited:
		return true, fp.exitErr
	default:
		return false, nil
	}
}

// Kill kills the runner of Pod namespace/name at once with SIGKILL, and
// with it everything it started (its PID namespace with
// Options.APIServer, else its process group): terraform gets no chance to
// save its state or release its lock. The Pod is reported Failed (exit
// code 137), as when a node loses the container or the kernel's OOM killer
// strikes, and stays, terminated, until someone deletes it. Kill returns
// once the Pod's status says so.
func (k *Kubelet) Kill(namespace, name string) error {
	k.mu.Lock()
	fp := k.find(namespace, name)
	if fp != nil && fp.cmd != nil {
		fp.lost = true
	}
	k.mu.Unlock()
	if fp == nil || fp.cmd == nil {
		return fmt.Errorf("no runner runs for Pod %s/%s", namespace, name)
	}
	k.kill(fp)
	select {
	case <-fp.reported:
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("the status of Pod %s/%s does not say that its runner was killed", namespace, name)
	}
}

// Run polls runner Pods until ctx ends, then kills every runner.
func (k *Kubelet) Run(ctx context.Context) {
	k.mu.Lock()
	k.ctx = ctx
	k.mu.Unlock()
	defer k.killAll()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var pods corev1.PodList
		if err := k.c.List(ctx, &pods, client.InNamespace(k.namespace), client.MatchingLabels{nameLabel: runnerPodValue}); err == nil {
			k.sync(ctx, pods.Items)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (k *Kubelet) sync(ctx context.Context, pods []corev1.Pod) {
	seen := map[types.UID]bool{}
	for i := range pods {
		pod := &pods[i]
		seen[pod.UID] = true
		k.mu.Lock()
		fp, known := k.pods[pod.UID]
		if !known {
			fp = &fakePod{namespace: pod.Namespace, name: pod.Name, uid: pod.UID, image: pod.Spec.Containers[0].Image}
			k.pods[pod.UID] = fp
			k.created[pod.Namespace] = append(k.created[pod.Namespace], pod.Name)
		}
		startTermination := pod.DeletionTimestamp != nil && !fp.terminating
		if startTermination {
			fp.terminating = true
			fp.deletionGrace = pod.DeletionGracePeriodSeconds
		}
		k.mu.Unlock()
		if !known && pod.DeletionTimestamp == nil {
			k.admit(ctx, pod, fp)
		}
		if startTermination {
			go k.terminate(ctx, fp)
		}
	}
	// Pods deleted at once (grace 0, or never bound): kill their runner.
	k.mu.Lock()
	var gone []*fakePod
	for uid, fp := range k.pods {
		if !seen[uid] && !fp.terminating {
			fp.terminating = true
			gone = append(gone, fp)
		}
	}
	k.mu.Unlock()
	for _, fp := range gone {
		k.kill(fp)
	}
}

// admit handles a new Pod according to its namespace's Behaviour.
func (k *Kubelet) admit(ctx context.Context, pod *corev1.Pod, fp *fakePod) {
	k.mu.Lock()
	b := k.behaviours[pod.Namespace]
	first := len(k.created[pod.Namespace]) == 1
	k.mu.Unlock()
	switch {
	case b == Unschedulable:
		k.setStatus(ctx, fp, func(s *corev1.PodStatus) {
			s.Phase = corev1.PodPending
			s.Conditions = []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
				Message: "0/1 nodes are available: 1 Insufficient cpu.", LastTransitionTime: metav1.Now(),
			}}
		})
	case b == ImageMissing:
		k.bind(ctx, pod)
		k.setStatus(ctx, fp, func(s *corev1.PodStatus) {
			s.Phase = corev1.PodPending
			s.ContainerStatuses = []corev1.ContainerStatus{{
				Name: runnerContainer, Image: fp.image,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
					Reason:  "ImagePullBackOff",
					Message: fmt.Sprintf("Back-off pulling image %q: not found", fp.image),
				}},
			}}
		})
	case b == FailAlways || (b == FailFirst && first):
		k.bind(ctx, pod)
		k.setStatus(ctx, fp, func(s *corev1.PodStatus) {
			s.Phase = corev1.PodFailed
			s.ContainerStatuses = []corev1.ContainerStatus{{
				Name: runnerContainer, Image: fp.image,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "boom: the runner could not start"}},
			}}
		})
	default:
		k.bind(ctx, pod)
		if err := k.start(ctx, pod, fp); err != nil {
			fmt.Fprintf(k.logs, "kubelet: starting %s/%s: %v\n", pod.Namespace, pod.Name, err)
			k.setStatus(ctx, fp, func(s *corev1.PodStatus) {
				s.Phase = corev1.PodFailed
				s.Message = err.Error()
			})
			return
		}
		k.setStatus(ctx, fp, func(s *corev1.PodStatus) {
			if s.Phase == corev1.PodSucceeded || s.Phase == corev1.PodFailed {
				return // the runner is already gone
			}
			now := metav1.Now()
			s.Phase = corev1.PodRunning
			s.HostIP = "127.0.0.1"
			s.PodIP = fp.ip
			s.PodIPs = []corev1.PodIP{{IP: fp.ip}}
			s.StartTime = &now
			s.Conditions = []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			}
			s.ContainerStatuses = []corev1.ContainerStatus{{
				Name: runnerContainer, Image: fp.image, Ready: true, Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			}}
		})
	}
}

// bind assigns the Pod to a node, which makes its deletion graceful (the
// API server then waits for the kubelet).
func (k *Kubelet) bind(ctx context.Context, pod *corev1.Pod) {
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
		Target:     corev1.ObjectReference{Kind: "Node", Name: "fake-node"},
	}
	if err := k.c.SubResource("binding").Create(ctx, pod, binding); err != nil {
		fmt.Fprintf(k.logs, "kubelet: binding %s/%s: %v\n", pod.Namespace, pod.Name, err)
	}
}

// exited records how a runner ended: its Pod terminates, unless it is
// being deleted (then terminate removes it).
func (k *Kubelet) exited(fp *fakePod) {
	defer close(fp.reported)
	k.mu.Lock()
	deleting, lost, ctx := fp.terminating, fp.lost, k.ctx
	k.mu.Unlock()
	if deleting || ctx.Err() != nil {
		return
	}
	term := &corev1.ContainerStateTerminated{Reason: "Completed", FinishedAt: metav1.Now()}
	phase := corev1.PodSucceeded
	if ps := fp.cmd.ProcessState; ps != nil && !ps.Success() {
		phase, term.Reason, term.ExitCode = corev1.PodFailed, "Error", int32(ps.ExitCode())
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			term.ExitCode = 128 + int32(ws.Signal())
		}
	}
	if lost {
		term.Message = "the runner was killed (SIGKILL), as when a node loses the container"
	}
	k.setStatus(ctx, fp, func(s *corev1.PodStatus) {
		s.Phase = phase
		s.Conditions = []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: metav1.Now()},
			{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: metav1.Now()},
		}
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: runnerContainer, Image: fp.image, State: corev1.ContainerState{Terminated: term}}}
	})
}

// terminate stops a gracefully deleted Pod's runner the way the kubelet
// does, then removes the Pod.
func (k *Kubelet) terminate(ctx context.Context, fp *fakePod) {
	k.mu.Lock()
	cmd := fp.cmd
	k.mu.Unlock()
	if cmd != nil {
		// The container's main process gets SIGTERM; everything in it
		// SIGKILL after the grace period.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		grace := 30 * time.Second
		if fp.deletionGrace != nil {
			grace = time.Duration(*fp.deletionGrace) * time.Second
		}
		select {
		case <-fp.exited:
		case <-time.After(grace):
			k.kill(fp)
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: fp.namespace, Name: fp.name}}
	if err := k.c.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &fp.uid}); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		fmt.Fprintf(k.logs, "kubelet: removing %s/%s: %v\n", fp.namespace, fp.name, err)
	}
}

// kill SIGKILLs the runner's whole process group (the container) and
// waits for the runner to exit.
func (k *Kubelet) kill(fp *fakePod) {
	k.mu.Lock()
	cmd := fp.cmd
	already := fp.killed
	fp.killed = true
	k.mu.Unlock()
	if cmd == nil {
		return
	}
	if !already {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Process.Kill()
	}
	<-fp.exited
}

func (k *Kubelet) killAll() {
	k.mu.Lock()
	pods := make([]*fakePod, 0, len(k.pods))
	for _, fp := range k.pods {
		fp.terminating = true
		pods = append(pods, fp)
	}
	k.mu.Unlock()
	for _, fp := range pods {
		k.kill(fp)
	}
}

// setStatus updates the Pod's status, retrying on conflicts.
func (k *Kubelet) setStatus(ctx context.Context, fp *fakePod, mutate func(*corev1.PodStatus)) {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur corev1.Pod
		if err := k.c.Get(ctx, client.ObjectKey{Namespace: fp.namespace, Name: fp.name}, &cur); err != nil {
			return err
		}
		if cur.UID != fp.uid {
			return nil // another Pod of that name
		}
		mutate(&cur.Status)
		return k.c.Status().Update(ctx, &cur)
	})
	if err != nil && !apierrors.IsNotFound(err) && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(k.logs, "kubelet: status of %s/%s: %v\n", fp.namespace, fp.name, err)
	}
}
