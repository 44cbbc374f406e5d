package placement

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/metrics"
	"github.com/landform-dev/landform/runner"
)

// DefaultPodReuse is --runner-pod-reuse's default: how long a recycled
// runner Pod waits for the next run of an object whose Pod would be the
// same. Reuse is on by default because it is what makes a run in a Pod
// cost about what the engine's own Pod does (issue 36's targets, met only
// with it: 21 API writes per object instead of 37, 0.76x the raw engine's
// Pod's CPU instead of 1.74x), and because the objects that share a Pod
// share its ServiceAccount, image and template anyway: each object's
// author could already run anything with them. Recycling clears what one
// object's runs could leave for the next (tested with a module that looks
// for it); what it cannot clear is the Pod's network identity, so where
// a NetworkPolicy or an audit must tell runs apart by Pod, 0 turns reuse
// off (docs/security.md). 30 s covers a burst (a new revision for the
// objects of a namespace, their drift checks) while a Pod holds its
// resource requests only that long after its last run.
const DefaultPodReuse = 30 * time.Second

// reuseMaxAge bounds a kept Pod's life: its env was resolved when it
// started (a token from a Secret, rotated since), so a Pod serves no run
// once it is this old, and changed Secrets reach the runs within it.
const reuseMaxAge = 10 * time.Minute

// reuseExitSlack is how long past the reuse time a recycled runner waits
// for a call before it exits by itself: the controller that parked it
// ends it at the reuse time, unless it stopped meanwhile.
const reuseExitSlack = 30 * time.Second

// podPool holds the runner Pods this controller process started or
// claimed (held), and of those the recycled ones waiting for the next run
// (parked, by reuseKey).
//
// A runner Pod's start is most of what one object's run costs the node
// (docs/benchmarks.md, Runner Pods on a real cluster: about a third of the
// machine's CPU per object, and 14 of its API writes are Kubernetes'
// for the Pod). With --runner-pod-reuse, a Pod whose object's run ended is
// recycled (runner.Client.Recycle: every process a module left killed, its
// directories emptied, its state token forgotten) and serves the next
// object of its namespace whose Pod would be the same (reuseKey), for up
// to the reuse time. The price is isolation in time rather than by Pod:
// the objects share the Pod's ServiceAccount, image and template anyway
// (that is the key), and what the recycling cannot clear (the node, the
// Pod's network identity, a volume of the template's) is what two Pods of
// that template share too. On by default (DefaultPodReuse).
type podPool struct {
	idle time.Duration

	mu     sync.Mutex
	held   map[types.UID]bool
	parked map[string][]*parkedPod
	kept   int // parked Pods, of every key
}

type parkedPod struct {
	pod   *corev1.Pod
	c     *runner.Client
	timer *time.Timer
}

// ReuseFor makes p recycle a runner Pod whose object's run ended and keep
// it for idle, for the next run of an object of its namespace whose Pod
// would be the same (podPool). Call it before the first Start.
func (p *Pod) ReuseFor(idle time.Duration) {
	if idle > 0 && !p.KeepPods {
		p.pool = &podPool{idle: idle, held: map[types.UID]bool{}, parked: map[string][]*parkedPod{}}
	}
}

// reuseKey is what two objects' runner Pods must share for one Pod to
// serve both: the namespace, and pod, as podFor builds it, but for what
// names the object and the run (its labels, name and owner).
func reuseKey(pod *corev1.Pod) string {
	labels := maps.Clone(pod.Labels)
	delete(labels, infrav1.OwnerNameLabel)
	delete(labels, infrav1.RunLabel)
	b, _ := json.Marshal(struct {
		Namespace   string
		Labels      map[string]string
		Annotations map[string]string
		Spec        corev1.PodSpec
	}{pod.Namespace, labels, pod.Annotations, pod.Spec})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// holds reports whether this process holds the Pod of uid (deleteLeftovers
// leaves it alone: it may be parked under another object's labels, or
// serving one).
func (p *Pod) holds(uid types.UID) bool {
	if p.pool == nil {
		return false
	}
	p.pool.mu.Lock()
	defer p.pool.mu.Unlock()
	return p.pool.held[uid]
}

func (p *Pod) hold(pod *corev1.Pod) {
	if p.pool == nil {
		return
	}
	p.pool.mu.Lock()
	p.pool.held[pod.UID] = true
	p.pool.mu.Unlock()
}

func (p *Pod) release(pod *corev1.Pod) {
	if p.pool == nil {
		return
	}
	p.pool.mu.Lock()
	delete(p.pool.held, pod.UID)
	p.pool.mu.Unlock()
}

// endHeld ends pod as without reuse (end) and lets go of it.
func (p *Pod) endHeld(log logr.Logger, pod *corev1.Pod, c *runner.Client) error {
	err := p.end(log, pod, c)
	p.release(pod)
	return err
}

// claim takes a parked Pod of key for a run whose Pod would be want: its
// labels and owner become want's, so that the garbage collector,
// deleteLeftovers and Attach treat it as the run's object's. A Pod that is
// being deleted or has ended is dropped, and so is one older than
// reuseMaxAge. Nil when none serves.
func (p *Pod) claim(ctx context.Context, log logr.Logger, want *corev1.Pod, key string) (*corev1.Pod, *runner.Client) {
	for {
		pp := p.unpark(key)
		if pp == nil {
			return nil, nil
		}
		if tooOld(pp.pod, time.Now()) {
			_ = p.endHeld(log, pp.pod, pp.c)
			continue
		}
		claimed := pp.pod.DeepCopy()
		for k, v := range want.Labels {
			claimed.Labels[k] = v
		}
		// A copy: want may still be created if this Pod cannot serve.
		claimed.OwnerReferences = slices.Clone(want.OwnerReferences)
		err := p.Client.Patch(ctx, claimed, client.MergeFrom(pp.pod))
		if err == nil && claimed.DeletionTimestamp == nil && claimed.Status.Phase == corev1.PodRunning {
			log.V(1).Info("runner Pod reused", "pod", claimed.Name)
			metrics.CountRunnerPodReused()
			return claimed, pp.c
		}
		log.V(1).Info("a parked runner Pod cannot serve: ending it", "pod", pp.pod.Name, "error", fmt.Sprint(err))
		_ = p.endHeld(log, pp.pod, pp.c)
	}
}

// unpark takes the most recently parked Pod of key, nil when none.
func (p *Pod) unpark(key string) *parkedPod {
	if p.pool == nil {
		return nil
	}
	p.pool.mu.Lock()
	defer p.pool.mu.Unlock()
	list := p.pool.parked[key]
	for i := len(list) - 1; i >= 0; i-- {
		// A Pod whose timer fired is left to it: the timer ends it.
		if list[i].timer.Stop() {
			pp := list[i]
			p.pool.setParked(key, append(list[:i:i], list[i+1:]...))
			return pp
		}
	}
	return nil
}

// setParked sets key's parked Pods, and the gauge of all. The caller holds
// pl.mu.
func (pl *podPool) setParked(key string, list []*parkedPod) {
	pl.kept += len(list) - len(pl.parked[key])
	if len(list) == 0 {
		delete(pl.parked, key)
	} else {
		pl.parked[key] = list
	}
	metrics.SetRunnerPodsKept(pl.kept)
}

// park recycles the runner of pod, whose run ended, and keeps it for the
// pool's idle time under key; a runner that refuses (a run still in
// progress, a runner that is not its container's process 1) is ended as
// without reuse, and so is a Pod older than reuseMaxAge. It reports
// whether the Pod was parked.
func (p *Pod) park(log logr.Logger, pod *corev1.Pod, c *runner.Client, key string) bool {
	if tooOld(pod, time.Now()) {
		log.V(1).Info("the runner Pod is too old to be kept", "pod", pod.Name, "max-age", reuseMaxAge.String())
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), recycleCallTimeout)
	err := c.Recycle(ctx, p.pool.idle+reuseExitSlack)
	cancel()
	if err != nil {
		log.V(1).Info("the runner could not be recycled: ending its Pod", "pod", pod.Name, "error", err.Error())
		return false
	}
	pp := &parkedPod{pod: pod, c: c}
	p.pool.mu.Lock()
	defer p.pool.mu.Unlock()
	pp.timer = time.AfterFunc(p.pool.idle, func() {
		if p.dropParked(key, pp) {
			_ = p.endHeld(log, pod, c)
		}
	})
	p.pool.setParked(key, append(p.pool.parked[key], pp))
	return true
}

// tooOld reports a Pod that should serve no more run (reuseMaxAge).
func tooOld(pod *corev1.Pod, now time.Time) bool {
	return !pod.CreationTimestamp.IsZero() && now.Sub(pod.CreationTimestamp.Time) > reuseMaxAge
}

// recycleCallTimeout bounds Recycle: the runner kills and reaps what a
// module left, and empties its directories.
const recycleCallTimeout = 15 * time.Second

// EndKept ends every kept Pod at once: the controller is stopping, and
// would otherwise leave them to exit by themselves after the reuse time
// and stay Completed until their object's next run. Each runner is asked
// to exit and its Pod deleted with its grace period.
func (p *Pod) EndKept(log logr.Logger) {
	if p.pool == nil {
		return
	}
	p.pool.mu.Lock()
	var all []*parkedPod
	for key, list := range p.pool.parked {
		// A Pod whose timer fired is left to it, as unpark leaves it:
		// the timer ends it once it finds it still parked.
		var fired []*parkedPod
		for _, pp := range list {
			if pp.timer.Stop() {
				all = append(all, pp)
			} else {
				fired = append(fired, pp)
			}
		}
		p.pool.setParked(key, fired)
	}
	p.pool.mu.Unlock()
	for _, pp := range all {
		ctx, cancel := context.WithTimeout(context.Background(), exitTimeout)
		_ = pp.c.Exit(ctx)
		cancel()
		pp.c.Close()
		if err := p.deletePod(pp.pod); err != nil {
			log.Error(err, "deleting a kept runner Pod", "pod", pp.pod.Name)
		}
		p.release(pp.pod)
	}
}

// dropParked removes pp from the pool; false when a claim took it first.
func (p *Pod) dropParked(key string, pp *parkedPod) bool {
	p.pool.mu.Lock()
	defer p.pool.mu.Unlock()
	list := p.pool.parked[key]
	for i, x := range list {
		if x == pp {
			p.pool.setParked(key, append(list[:i:i], list[i+1:]...))
			return true
		}
	}
	return false
}
