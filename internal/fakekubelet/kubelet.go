// Package fakekubelet plays the kubelet for Landform's runner Pods in
// tests: it starts the real landform-runner binary for each runner Pod
// (volumes materialised in a directory, listening on the Pod's own loopback
// IP 127.0.0.N), reports it Running with that IP, SIGTERMs it on graceful
// deletion and kills it after the grace period or at once. The runner
// processes are children of the test, not of the controller under test.
package fakekubelet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// What runner Pods look like (internal/placement/pod_spec.go).
const (
	nameLabel       = "app.kubernetes.io/name"
	runnerPodValue  = "landform-runner"
	runnerContainer = "runner"
)

func ptr[T any](v T) *T { return &v }

// Kubelet plays the kubelet for runner Pods: for each Pod the placer
// creates it binds the Pod to a node, materialises its volumes (the TLS
// Secret, emptyDirs) in a directory, starts the real runner binary with the
// Pod's arguments (mount paths mapped to that directory, listening on the
// Pod's own loopback IP 127.0.0.N), and reports the Pod Running with that
// IP. A deleted Pod gets SIGTERM and, after its grace period, SIGKILL, and
// is then removed as the kubelet does. Namespaces can be told to
// misbehave instead (see Behaviour).
type Kubelet struct {
	c         client.Client
	runnerBin string
	// path is the runners' PATH: the engine's directory first, as in the
	// runner image.
	path string
	logs io.Writer
	dir  string
	// image maps paths inside the runner image to host paths.
	image map[string]string

	mu         sync.Mutex
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
)

// fakePod is a Pod the kubelet handles.
type fakePod struct {
	namespace, name string
	uid             types.UID
	ip              string
	cmd             *exec.Cmd
	exited          chan struct{}
	exitErr         error
	// DeletionGrace is the grace period the Pod was deleted with; nil
	// until it is deleted gracefully.
	deletionGrace *int64
	terminating   bool
	killed        bool
}

// New returns a kubelet that starts runnerBin for the runner Pods c sees,
// with path as their PATH, their files under dir, and image mapping paths
// inside the runner image to host paths. Run starts it.
func New(c client.Client, runnerBin, path, dir string, image map[string]string, logs io.Writer) *Kubelet {
	return &Kubelet{
		c: c, runnerBin: runnerBin, path: path, dir: dir, image: image, logs: logs,
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

// DeletionGrace is the grace period namespace/name was deleted with.
func (k *Kubelet) DeletionGrace(namespace, name string) *int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range k.pods {
		if p.namespace == namespace && p.name == name {
			return p.deletionGrace
		}
	}
	return nil
}

// Run polls runner Pods until ctx ends, then kills every runner.
func (k *Kubelet) Run(ctx context.Context) {
	defer k.killAll()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var pods corev1.PodList
		if err := k.c.List(ctx, &pods, client.MatchingLabels{nameLabel: runnerPodValue}); err == nil {
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
			fp = &fakePod{namespace: pod.Namespace, name: pod.Name, uid: pod.UID}
			k.pods[pod.UID] = fp
			k.created[pod.Namespace] = append(k.created[pod.Namespace], pod.Name)
		}
		startTermination := pod.DeletionTimestamp != nil && !fp.terminating
		if startTermination {
			fp.terminating = true
			fp.deletionGrace = pod.DeletionGracePeriodSeconds
		}
		k.mu.Unlock()
		switch {
		case !known:
			k.admit(ctx, pod, fp)
		case startTermination:
			go k.terminate(ctx, fp)
		}
	}
	// Pods deleted at once (grace 0, or never bound): kill their runner.
	k.mu.Lock()
	var gone []*fakePod
	for uid, fp := range k.pods {
		if !seen[uid] && fp.cmd != nil && !fp.killed {
			fp.killed = true
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
		k.setStatus(ctx, pod, func(s *corev1.PodStatus) {
			s.Phase = corev1.PodPending
			s.Conditions = []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
				Message: "0/1 nodes are available: 1 Insufficient cpu.", LastTransitionTime: metav1.Now(),
			}}
		})
	case b == FailAlways || (b == FailFirst && first):
		k.bind(ctx, pod)
		k.setStatus(ctx, pod, func(s *corev1.PodStatus) {
			s.Phase = corev1.PodFailed
			s.ContainerStatuses = []corev1.ContainerStatus{{
				Name: runnerContainer, Image: pod.Spec.Containers[0].Image,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "boom: the runner could not start"}},
			}}
		})
	default:
		k.bind(ctx, pod)
		if err := k.start(ctx, pod, fp); err != nil {
			fmt.Fprintf(k.logs, "kubelet: starting %s/%s: %v\n", pod.Namespace, pod.Name, err)
			k.setStatus(ctx, pod, func(s *corev1.PodStatus) {
				s.Phase = corev1.PodFailed
				s.Message = err.Error()
			})
			return
		}
		k.setStatus(ctx, pod, func(s *corev1.PodStatus) {
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
				Name: runnerContainer, Image: pod.Spec.Containers[0].Image, Ready: true, Started: ptr(true),
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

// start materialises the Pod's volumes and starts its runner.
func (k *Kubelet) start(ctx context.Context, pod *corev1.Pod, fp *fakePod) error {
	root := filepath.Join(k.dir, string(pod.UID))
	volumes := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		dir := filepath.Join(root, "volumes", v.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		volumes[v.Name] = dir
		if v.Secret == nil {
			continue
		}
		var s corev1.Secret
		if err := k.c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: v.Secret.SecretName}, &s); err != nil {
			return fmt.Errorf("secret volume %s: %w", v.Name, err)
		}
		for key, data := range s.Data {
			if err := os.WriteFile(filepath.Join(dir, key), data, 0o600); err != nil {
				return err
			}
		}
	}
	container := pod.Spec.Containers[0]
	mounts := maps.Clone(k.image)
	for _, m := range container.VolumeMounts {
		mounts[m.MountPath] = volumes[m.Name]
	}
	mapPath := func(v string) string {
		paths := make([]string, 0, len(mounts))
		for p := range mounts {
			paths = append(paths, p)
		}
		sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) })
		for _, p := range paths {
			if v == p || strings.HasPrefix(v, p+"/") {
				return mounts[p] + strings.TrimPrefix(v, p)
			}
		}
		return v
	}

	k.mu.Lock()
	k.nextIP++
	fp.ip = fmt.Sprintf("127.0.0.%d", k.nextIP)
	k.mu.Unlock()
	args := make([]string, len(container.Args))
	for i, a := range container.Args {
		args[i] = mapPath(a)
		// The Pod listens on all its addresses; here, on its own IP.
		if i > 0 && container.Args[i-1] == "--listen" && strings.HasPrefix(a, ":") {
			args[i] = fp.ip + a
		}
	}
	envs := []string{"PATH=" + k.path}
	for _, e := range container.Env {
		switch {
		case e.ValueFrom == nil:
			envs = append(envs, e.Name+"="+mapPath(e.Value))
		case e.ValueFrom.FieldRef != nil:
			// The downward API, as the kubelet resolves it.
			v := map[string]string{"metadata.name": pod.Name, "metadata.namespace": pod.Namespace, "metadata.uid": string(pod.UID)}[e.ValueFrom.FieldRef.FieldPath]
			envs = append(envs, e.Name+"="+v)
		}
	}
	cmd := exec.Command(k.runnerBin, args...)
	cmd.Env = envs
	cmd.Stdout, cmd.Stderr = k.logs, k.logs
	if err := cmd.Start(); err != nil {
		return err
	}
	k.mu.Lock()
	fp.cmd = cmd
	fp.exited = make(chan struct{})
	k.mu.Unlock()
	go func() {
		fp.exitErr = cmd.Wait()
		close(fp.exited)
		os.RemoveAll(root)
	}()
	return nil
}

// terminate stops a gracefully deleted Pod's runner the way the kubelet
// does, then removes the Pod.
func (k *Kubelet) terminate(ctx context.Context, fp *fakePod) {
	if fp.cmd != nil {
		_ = fp.cmd.Process.Signal(syscall.SIGTERM)
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

func (k *Kubelet) kill(fp *fakePod) {
	k.mu.Lock()
	started := fp.cmd != nil
	k.mu.Unlock()
	if !started {
		return
	}
	_ = fp.cmd.Process.Kill()
	<-fp.exited
}

func (k *Kubelet) killAll() {
	k.mu.Lock()
	pods := make([]*fakePod, 0, len(k.pods))
	for _, fp := range k.pods {
		pods = append(pods, fp)
	}
	k.mu.Unlock()
	for _, fp := range pods {
		k.kill(fp)
	}
}

// setStatus updates the Pod's status, retrying on conflicts.
func (k *Kubelet) setStatus(ctx context.Context, pod *corev1.Pod, mutate func(*corev1.PodStatus)) {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur corev1.Pod
		if err := k.c.Get(ctx, client.ObjectKeyFromObject(pod), &cur); err != nil {
			return err
		}
		mutate(&cur.Status)
		return k.c.Status().Update(ctx, &cur)
	})
	if err != nil && !apierrors.IsNotFound(err) && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(k.logs, "kubelet: status of %s/%s: %v\n", pod.Namespace, pod.Name, err)
	}
}

// RunnerExited says whether the runner of namespace/name has exited, and
// how.
func (k *Kubelet) RunnerExited(namespace, name string) (bool, error) {
	k.mu.Lock()
	var exited chan struct{}
	var fp *fakePod
	for _, p := range k.pods {
		if p.namespace == namespace && p.name == name {
			fp, exited = p, p.exited
		}
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
