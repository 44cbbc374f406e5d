package placement

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/certs"
	"github.com/landform-dev/landform/internal/metrics"
	"github.com/landform-dev/landform/runner"
)

const (
	// DefaultPort is the port runners listen on in their Pod.
	DefaultPort = 9443
	// DefaultStartTimeout bounds a runner Pod's start: scheduling, image
	// pull, and the runner's health check.
	DefaultStartTimeout = 3 * time.Minute

	// stopTimeout bounds the API calls made when a run ends, which may
	// happen after the caller's context ended.
	stopTimeout = 30 * time.Second
)

// errStartTimeout is the cause of a start that ran out of StartTimeout.
var errStartTimeout = errors.New("runner start timeout")

// Pod runs each runner in a Pod of its own in the Terraform object's
// namespace, and dials it over mTLS. Used by `--runner=pod`.
type Pod struct {
	// Client reads and writes Pods, ServiceAccounts and Secrets. It should
	// not be a caching client: that would watch every Pod in the cluster.
	// A client that can also watch (client.WithWatch) sees a Pod start as
	// it happens (untilPod); another is polled.
	Client client.Client
	// Certs issues the namespaces' runner certificates and the
	// controller's client certificate.
	Certs *certs.Manager
	// Image is the runner image, unless spec.runnerPodTemplate sets one.
	Image string
	// KeepPods keeps runner Pods after their run (and failed ones), for
	// debugging.
	KeepPods bool
	// StartTimeout bounds a start. Default DefaultStartTimeout.
	StartTimeout time.Duration
	// Grace is how long terraform gets to stop after an interrupt before
	// the runner kills it. Default runner.DefaultInterruptGrace.
	Grace time.Duration
	// ProviderMirrors are provider filesystem mirrors inside the runner
	// image, passed as --provider-mirror.
	ProviderMirrors []string
	// Port the runner listens on. Default DefaultPort.
	Port int
	// Policy is what Terraform objects may choose for their runner Pods;
	// Start refuses what it does not allow (pod_policy.go).
	Policy PodPolicy

	// pool, set by ReuseFor, keeps recycled runner Pods for the next
	// object's run (pod_reuse.go).
	pool *podPool

	// poll replaces podPoll, for tests.
	poll *wait.Backoff
}

// Start implements Placer: it creates the runner Pod, waits until it runs
// and its runner answers, and returns a client to it. A Pod that fails
// before its runner answers is replaced once.
func (p *Pod) Start(ctx context.Context, obj *infrav1.Terraform, runID string) (*Run, error) {
	started := time.Now()
	log := logr.FromContextOrDiscard(ctx)
	timeout := p.startTimeout()
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errStartTimeout)
	defer cancel()

	if err := p.Check(obj); err != nil {
		return nil, err
	}
	if err := p.checkServiceAccount(ctx, obj); err != nil {
		return nil, err
	}
	nsTLS, err := p.Certs.ForNamespace(ctx, obj.Namespace)
	if err != nil {
		return nil, fmt.Errorf("preparing the runner certificate: %w", err)
	}
	p.deleteLeftovers(ctx, log, obj)
	// The Pod the run needs, built once: a kept Pod of its key serves
	// instead, else each attempt creates a copy of it.
	want := p.podFor(obj, runID, nsTLS.SecretName)
	key := ""
	if p.pool != nil {
		key = reuseKey(want)
		if pod, c := p.claim(ctx, log, want, key); pod != nil {
			metrics.ObserveRunnerStart("pod", time.Since(started))
			return p.run(log, obj, pod, c, key), nil
		}
	}

	var firstFailure string
	for attempt := 1; ; attempt++ {
		pod, err := p.createPod(ctx, want.DeepCopy())
		if err != nil {
			return nil, err
		}
		log.V(1).Info("runner Pod created", "pod", pod.Name, "attempt", attempt)
		p.hold(pod)
		c, err := p.await(ctx, pod, nsTLS.ClientTLS, timeout)
		if err == nil {
			metrics.ObserveRunnerStart("pod", time.Since(started))
			return p.run(log, obj, pod, c, key), nil
		}
		p.cleanup(log, pod)
		var failed *podFailedError
		if !errors.As(err, &failed) {
			return nil, err
		}
		if attempt == 2 {
			return nil, &Error{
				Reason:  infrav1.RunnerFailedReason,
				Message: fmt.Sprintf("runner Pod %s failed before its runner answered: %s (the Pod before it failed too: %s)", failed.name, failed.status, firstFailure),
			}
		}
		log.Info("runner Pod failed before its runner answered: replacing it", "pod", pod.Name, "status", failed.status)
		firstFailure = failed.name + ": " + failed.status
	}
}

func (p *Pod) startTimeout() time.Duration {
	if p.StartTimeout > 0 {
		return p.StartTimeout
	}
	return DefaultStartTimeout
}

func (p *Pod) port() int {
	if p.Port > 0 {
		return p.Port
	}
	return DefaultPort
}

func (p *Pod) grace() time.Duration {
	if p.Grace > 0 {
		return p.Grace
	}
	return runner.DefaultInterruptGrace
}

// checkServiceAccount fails clearly, before any Pod exists, when the
// runner's ServiceAccount is missing: the Pod would never be created.
func (p *Pod) checkServiceAccount(ctx context.Context, obj *infrav1.Terraform) error {
	name := p.serviceAccountName(obj)
	err := p.Client.Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: name}, &corev1.ServiceAccount{})
	switch {
	case apierrors.IsNotFound(err):
		return &Error{
			Reason: infrav1.RunnerServiceAccountMissingReason,
			Message: fmt.Sprintf("the runner ServiceAccount %s/%s does not exist: list namespace %s in the Helm chart's runner namespaces "+
				"(it creates the ServiceAccount), or `kubectl create serviceaccount %s -n %s` (it needs no permission: runners reach the state with the object's own state identity), "+
				"or set spec.serviceAccountName", obj.Namespace, name, obj.Namespace, name, obj.Namespace),
		}
	case err != nil:
		return fmt.Errorf("reading the runner ServiceAccount %s/%s: %w", obj.Namespace, name, err)
	}
	return nil
}

// deleteLeftovers deletes runner Pods of obj left by an earlier controller
// process: one object runs one runner at a time, so any other is stale,
// and deleting it gracefully lets its terraform release the state lock.
// They are found by their labels, since Pods that run a destroy have no
// owner reference.
func (p *Pod) deleteLeftovers(ctx context.Context, log logr.Logger, obj *infrav1.Terraform) {
	if p.KeepPods {
		return
	}
	var pods corev1.PodList
	if err := p.Client.List(ctx, &pods, client.InNamespace(obj.Namespace), client.MatchingLabels(podLabels(obj))); err != nil {
		log.Error(err, "listing leftover runner Pods")
		return
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.DeletionTimestamp != nil || p.holds(pod.UID) {
			continue
		}
		log.Info("deleting a leftover runner Pod", "pod", pod.Name)
		if err := p.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
			log.Error(err, "deleting a leftover runner Pod", "pod", pod.Name)
		}
	}
}

func (p *Pod) createPod(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	if err := p.Client.Create(ctx, pod); err != nil {
		return nil, fmt.Errorf("creating the runner Pod in %s: %w", pod.Namespace, err)
	}
	return pod, nil
}

// podFailedError is a Pod that failed or vanished before its runner
// answered.
type podFailedError struct {
	name   string
	status string
}

func (e *podFailedError) Error() string {
	return fmt.Sprintf("runner Pod %s failed: %s", e.name, e.status)
}

// await waits until pod runs with an IP, then dials its runner, watching
// the Pod meanwhile so that a Pod that fails ends the wait at once.
func (p *Pod) await(ctx context.Context, pod *corev1.Pod, tlsConfig *tls.Config, timeout time.Duration) (*runner.Client, error) {
	var notStarting error
	err := p.untilPod(ctx, pod, func(cur *corev1.Pod, err error) (bool, error) {
		cur, err = startingPod(pod, cur, err)
		if err != nil {
			notStarting = p.waitError(ctx, pod, err, timeout)
			return true, nil
		}
		*pod = *cur
		if pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" {
			return true, nil
		}
		notStarting = cannotStart(pod)
		return notStarting != nil, nil
	})
	switch {
	case notStarting != nil:
		return nil, notStarting
	case err != nil:
		return nil, p.waitError(ctx, pod, context.Cause(ctx), timeout)
	}

	dialCtx, cancelDial := context.WithCancelCause(ctx)
	defer cancelDial(nil)
	watchDone := make(chan struct{})
	dialPoll := time.Second
	if p.poll != nil {
		dialPoll = p.poll.Duration
	}
	go func() {
		defer close(watchDone)
		for {
			select {
			case <-dialCtx.Done():
				return
			case <-time.After(dialPoll):
			}
			cur, err := p.readPod(dialCtx, pod)
			if _, err := startingPod(pod, cur, err); err != nil {
				cancelDial(err)
				return
			}
		}
	}()
	addr := net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(p.port()))
	c, err := runner.Dial(dialCtx, addr, tlsConfig)
	cancelDial(nil)
	<-watchDone
	if err == nil {
		return c, nil
	}
	var failed *podFailedError
	if errors.As(context.Cause(dialCtx), &failed) {
		return nil, failed
	}
	return nil, p.waitError(ctx, pod, err, timeout)
}

// cannotStart reports a Pod whose runner container waits for something
// that will not come by itself (an image that cannot be pulled, a
// configuration the kubelet refuses): the run fails at once, naming it,
// instead of after the start timeout. The object retries after its
// retryInterval with a new Pod, so a registry that was only down recovers.
func cannotStart(pod *corev1.Pod) error {
	for _, cs := range pod.Status.ContainerStatuses {
		w := cs.State.Waiting
		if w == nil {
			continue
		}
		switch w.Reason {
		case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName":
			return &Error{
				Reason: infrav1.RunnerFailedReason,
				Message: fmt.Sprintf("runner Pod %s/%s cannot start: its image %q cannot be pulled (%s); fix spec.runnerPodTemplate.spec.image or the controller's runner image, or make the image available to the node",
					pod.Namespace, pod.Name, cs.Image, joinNonEmpty(w.Reason, w.Message)),
			}
		case "CreateContainerConfigError", "CreateContainerError":
			return &Error{
				Reason: infrav1.RunnerFailedReason,
				Message: fmt.Sprintf("runner Pod %s/%s cannot start: %s; check spec.runnerPodTemplate (env, envFrom, volumes)",
					pod.Namespace, pod.Name, joinNonEmpty(w.Reason, w.Message)),
			}
		}
	}
	return nil
}

// startingPod is cur, pod as last read or watched (nil: gone), or a
// podFailedError when it failed or is gone.
func startingPod(pod, cur *corev1.Pod, err error) (*corev1.Pod, error) {
	switch {
	case err != nil:
		return nil, err
	case cur == nil || cur.UID != pod.UID || cur.DeletionTimestamp != nil:
		return nil, &podFailedError{name: pod.Name, status: "deleted"}
	case cur.Status.Phase == corev1.PodFailed || cur.Status.Phase == corev1.PodSucceeded:
		return nil, &podFailedError{name: pod.Name, status: describePod(cur)}
	}
	return cur, nil
}

// waitError explains a wait for pod that ended with err: a start timeout
// names the Pod's last status.
func (p *Pod) waitError(ctx context.Context, pod *corev1.Pod, err error, timeout time.Duration) error {
	var failed *podFailedError
	if errors.As(err, &failed) {
		return err
	}
	if !errors.Is(context.Cause(ctx), errStartTimeout) {
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for runner Pod %s/%s: %w", pod.Namespace, pod.Name, context.Cause(ctx))
		}
		return err
	}
	kept := ""
	if p.KeepPods {
		kept = " (the Pod is kept for debugging)"
	}
	if pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" {
		return &Error{
			Reason: infrav1.RunnerStartTimeoutReason,
			Message: fmt.Sprintf("runner Pod %s/%s runs (IP %s) but its runner did not answer within %s%s: %v; check the runner image and its logs",
				pod.Namespace, pod.Name, pod.Status.PodIP, timeout, kept, err),
		}
	}
	return &Error{
		Reason: infrav1.RunnerStartTimeoutReason,
		Message: fmt.Sprintf("runner Pod %s/%s did not start within %s%s: %s; check the image, the Pod template and the cluster's capacity",
			pod.Namespace, pod.Name, timeout, kept, describePod(pod)),
	}
}

// cleanup deletes a Pod that did not become a run, unless KeepPods.
func (p *Pod) cleanup(log logr.Logger, pod *corev1.Pod) {
	p.release(pod)
	if p.KeepPods {
		log.Info("keeping the runner Pod that did not start, for debugging", "pod", pod.Name)
		return
	}
	if err := p.deletePod(pod); err != nil {
		log.Error(err, "deleting a runner Pod that did not start", "pod", pod.Name)
	}
}

// run wraps a started Pod of obj. Stopping it parks a recycled runner for
// the next run of key, with --runner-pod-reuse (pod_reuse.go), unless obj
// is being deleted; else it asks its runner to exit (pod_end.go).
// A runner that will not (a run still in progress) has its Pod deleted
// without overriding its grace period: the kubelet sends SIGTERM, the
// runner interrupts terraform, which releases its lock, and only after
// terminationGracePeriodSeconds (longer than the runner's grace) is it
// killed.
func (p *Pod) run(log logr.Logger, obj *infrav1.Terraform, pod *corev1.Pod, c *runner.Client, key string) *Run {
	var once sync.Once
	var stopErr error
	reusable := p.pool != nil && obj.DeletionTimestamp == nil
	return &Run{
		Client:     c,
		Backend:    map[string]string{"in_cluster_config": "true"},
		Identity:   "Pod " + pod.Namespace + "/" + pod.Name,
		KeptOnStop: reusable && !p.KeepPods,
		grace:      p.grace(),
		alive: func(ctx context.Context) (bool, string) {
			return p.podAlive(ctx, pod)
		},
		stop: func(time.Duration) error {
			once.Do(func() {
				if p.KeepPods {
					c.Close()
					return
				}
				if reusable && p.park(log, pod, c, key) {
					return
				}
				stopErr = p.endHeld(log, pod, c)
			})
			return stopErr
		},
	}
}

// deletePod deletes pod, the one of that UID only, with its grace period.
func (p *Pod) deletePod(pod *corev1.Pod) error {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := p.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting runner Pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// podAlive reads pod and reports whether its runner may still run
// (aliveGiven).
func (p *Pod) podAlive(ctx context.Context, pod *corev1.Pod) (bool, string) {
	cur, err := p.readPod(ctx, pod)
	return aliveGiven(pod, cur, err)
}

// aliveGiven reports whether pod's runner may still run, cur being pod as
// last read or watched (nil: gone): a Pod being deleted still runs its
// runner while it interrupts terraform. Only a Pod that is gone, replaced
// or terminated is reported dead; one that could not be read (an API
// server restart) may be alive.
func aliveGiven(pod, cur *corev1.Pod, err error) (bool, string) {
	switch {
	case err != nil:
		return true, ""
	case cur == nil || cur.UID != pod.UID:
		return false, fmt.Sprintf("runner Pod %s/%s was deleted", pod.Namespace, pod.Name)
	case cur.Status.Phase == corev1.PodSucceeded || cur.Status.Phase == corev1.PodFailed:
		return false, fmt.Sprintf("runner Pod %s/%s terminated: %s", pod.Namespace, pod.Name, describePod(cur))
	}
	return true, ""
}

// Durable implements Placer: runner Pods outlive the controller.
func (p *Pod) Durable() bool { return true }

// Attach implements Placer: it finds the runner Pod serving obj — the one
// labelled with runID, else the newest (a Pod started for a plan serves
// the apply that follows it) — and dials it, waiting for it to run if it
// is still starting. The runner itself then says whether it knows runID.
func (p *Pod) Attach(ctx context.Context, obj *infrav1.Terraform, runID string) (*Run, error) {
	var pods corev1.PodList
	if err := p.Client.List(ctx, &pods, client.InNamespace(obj.Namespace), client.MatchingLabels(podLabels(obj))); err != nil {
		return nil, fmt.Errorf("looking for the runner Pod of run %s: %w", runID, err)
	}
	var pod *corev1.Pod
	for i := range pods.Items {
		c := &pods.Items[i]
		switch {
		case c.DeletionTimestamp != nil || c.Status.Phase == corev1.PodSucceeded || c.Status.Phase == corev1.PodFailed:
		case c.Labels[infrav1.RunLabel] == runID:
			pod = c
		case pod == nil || (pod.Labels[infrav1.RunLabel] != runID && pod.CreationTimestamp.Before(&c.CreationTimestamp)):
			pod = c
		}
	}
	if pod == nil {
		return nil, fmt.Errorf("%w: no runner Pod of %s/%s runs any more", ErrRunnerGone, obj.Namespace, obj.Name)
	}
	if ok, why := p.podAlive(ctx, pod); !ok {
		return nil, fmt.Errorf("%w: %s", ErrRunnerGone, why)
	}
	nsTLS, err := p.Certs.ForNamespace(ctx, obj.Namespace)
	if err != nil {
		return nil, fmt.Errorf("preparing the runner certificate: %w", err)
	}
	timeout := p.startTimeout()
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errStartTimeout)
	defer cancel()
	c, err := p.await(ctx, pod, nsTLS.ClientTLS, timeout)
	var failed *podFailedError
	if errors.As(err, &failed) {
		return nil, fmt.Errorf("%w: runner Pod %s/%s %s", ErrRunnerGone, pod.Namespace, pod.Name, failed.status)
	}
	if err != nil {
		return nil, err
	}
	key := ""
	if p.pool != nil {
		key = reuseKey(p.podFor(obj, runID, nsTLS.SecretName))
		p.hold(pod)
	}
	return p.run(logr.FromContextOrDiscard(ctx), obj, pod, c, key), nil
}
