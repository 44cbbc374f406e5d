package placement

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"

	"github.com/landform-dev/landform/runner"
)

const (
	// exitTimeout bounds the call that asks a runner to exit.
	exitTimeout = 5 * time.Second
	// endWait bounds the wait for a Pod whose runner exited to be reported
	// terminated; past it, the Pod is deleted with its grace period anyway.
	endWait = 30 * time.Second
)

// end ends a stopped run's Pod. Its runner, asked to exit (runner.Exit),
// exits 0 once the controller has collected its run: the container ends by
// itself, the kubelet reports the Pod Succeeded, and the Pod is deleted
// then, which the API server does at once for a terminated Pod. Deleting
// the running Pod instead had the kubelet stop its container (an event, a
// SIGTERM) and write the Pod's final deletion: `make bench-cluster`
// counted both among a Pod's API writes.
//
// The wait for the kubelet's report (about a second on the real node)
// runs in the background, so that a reconcile that stops an idle runner
// is not held by it. A controller that stops meanwhile leaves the Pod
// Completed: the object's next run deletes it with any other leftover,
// and the garbage collector with the object.
//
// A runner that does not exit (a run still in progress, an
// older runner without the call, one that cannot be reached) has its Pod
// deleted gracefully at once, as before.
func (p *Pod) end(log logr.Logger, pod *corev1.Pod, c *runner.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), exitTimeout)
	err := c.Exit(ctx)
	cancel()
	c.Close()
	if err != nil {
		if !runner.IsReason(err, runner.ReasonRunnerBusy) && status.Code(err) != codes.Unimplemented {
			log.V(1).Info("the runner did not exit when asked: deleting its Pod", "pod", pod.Name, "error", err.Error())
		}
		return p.deletePod(pod)
	}
	go p.deleteEnded(log, pod)
	return nil
}

// deleteEnded deletes pod once it is reported terminated or gone
// (aliveGiven: a Pod someone else deletes meanwhile is waited for until it
// is gone), or after endWait.
func (p *Pod) deleteEnded(log logr.Logger, pod *corev1.Pod) {
	ctx, cancel := context.WithTimeout(context.Background(), endWait)
	defer cancel()
	err := p.untilPod(ctx, pod, func(cur *corev1.Pod, err error) (bool, error) {
		alive, _ := aliveGiven(pod, cur, err)
		return !alive, nil
	})
	if err != nil {
		log.Info("the runner exited but its Pod was not reported terminated: deleting it", "pod", pod.Name, "waited", endWait.String())
	}
	if err := p.deletePod(pod); err != nil {
		log.Error(err, "deleting the runner Pod of an exited runner", "pod", pod.Name)
	}
}
