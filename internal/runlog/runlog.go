// Package runlog keeps the terraform output of each Terraform object's last
// run per phase (plan, apply, destroy) in a Secret the CLI reads
// (`landform logs`). Lines are redacted by the caller before they get here;
// each phase keeps only its last MaxBytes, and a running phase is flushed
// every FlushInterval (the first time FlushInterval after its start) so
// that it can be followed live.
package runlog

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/owned"
)

// Phase is one kind of run.
type Phase string

// The phases whose logs are kept.
const (
	PhasePlan    Phase = "plan"
	PhaseApply   Phase = "apply"
	PhaseDestroy Phase = "destroy"
)

// Phases lists every phase in run order.
var Phases = []Phase{PhasePlan, PhaseApply, PhaseDestroy}

// States of a phase's log.
const (
	StateRunning   = "running"
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
)

const (
	// MaxBytes bounds one phase's log; older lines are dropped first.
	MaxBytes = 256 << 10
	// FlushInterval is how often a running phase is written.
	FlushInterval = 2 * time.Second

	fieldOwner = "landform-controller-runlog"
	annPrefix  = "infra.landform.dev/"
)

// SecretName is the name of the Secret holding name's run logs.
func SecretName(name string) string { return names.Prefixed("tflogs-", name, names.MaxName) }

// Key is the Secret data key of a phase's text.
func Key(p Phase) string { return string(p) + ".log" }

func stateAnnotation(p Phase) string    { return annPrefix + string(p) + "-state" }
func startedAnnotation(p Phase) string  { return annPrefix + string(p) + "-started-at" }
func finishedAnnotation(p Phase) string { return annPrefix + string(p) + "-finished-at" }

// Recorder collects one phase's lines and writes them to the Secret.
type Recorder struct {
	c       client.Client
	owner   *v1alpha1.Terraform
	phase   Phase
	started time.Time

	mu      sync.Mutex
	buf     strings.Builder
	dirty   bool
	stop    chan struct{}
	stopped chan struct{}
	ending  sync.Once
}

// Start begins a phase's log (replacing the previous one of that phase) and
// flushes it in the background, every FlushInterval from its start, until
// End.
func Start(ctx context.Context, c client.Client, owner *v1alpha1.Terraform, phase Phase) *Recorder {
	r := &Recorder{c: c, owner: owner, phase: phase, started: time.Now().UTC(), dirty: true,
		stop: make(chan struct{}), stopped: make(chan struct{})}
	go r.loop(context.WithoutCancel(ctx))
	return r
}

// Line adds one line.
func (r *Recorder) Line(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf.WriteString(s)
	r.buf.WriteByte('\n')
	if r.buf.Len() > MaxBytes {
		tail := r.buf.String()[r.buf.Len()-MaxBytes/2:]
		if i := strings.IndexByte(tail, '\n'); i >= 0 {
			tail = tail[i+1:]
		}
		r.buf.Reset()
		r.buf.WriteString("[earlier output dropped]\n")
		r.buf.WriteString(tail)
	}
	r.dirty = true
}

// End writes the phase's final log with its outcome. Errors writing logs
// never fail a run: they are returned for the caller to log, who may call
// End again to retry.
func (r *Recorder) End(ctx context.Context, runErr error) error {
	r.ending.Do(func() { close(r.stop) })
	<-r.stopped
	state := StateSucceeded
	if runErr != nil {
		state = StateFailed
	}
	return r.write(ctx, state, time.Now().UTC())
}

func (r *Recorder) loop(ctx context.Context) {
	defer close(r.stopped)
	// The first write waits for the first tick too: a run shorter than
	// FlushInterval (most plans and applies of small modules) costs one
	// write, at its end, not two.
	t := time.NewTicker(FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.mu.Lock()
			dirty := r.dirty
			r.mu.Unlock()
			if dirty {
				_ = r.write(ctx, StateRunning, time.Time{})
			}
		}
	}
}

// write applies this phase's key and annotations only, so phases never
// overwrite each other.
func (r *Recorder) write(ctx context.Context, state string, finished time.Time) error {
	r.mu.Lock()
	text := r.buf.String()
	r.dirty = false
	r.mu.Unlock()
	ann := map[string]string{
		stateAnnotation(r.phase):   state,
		startedAnnotation(r.phase): r.started.Format(time.RFC3339),
	}
	if !finished.IsZero() {
		ann[finishedAnnotation(r.phase)] = finished.Format(time.RFC3339)
	}
	s := corev1ac.Secret(SecretName(r.owner.Name), r.owner.Namespace).
		WithLabels(owned.Labels(r.owner)).
		WithAnnotations(ann).
		WithOwnerReferences(owned.Reference(r.owner)).
		WithType(corev1.SecretTypeOpaque).
		WithData(map[string][]byte{Key(r.phase): []byte(text)})
	// The field owner is per phase: a phase's apply leaves the others' keys.
	if err := r.c.Apply(ctx, s, client.FieldOwner(fieldOwner+"-"+string(r.phase)), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing %s log: %w", r.phase, err)
	}
	return nil
}

// PhaseLog is one phase's last log.
type PhaseLog struct {
	Phase      Phase
	State      string
	StartedAt  time.Time
	FinishedAt time.Time
	Text       string
}

// Read returns the logs kept for the Terraform object namespace/name, by
// phase; phases never run are absent.
func Read(ctx context.Context, c client.Reader, namespace, name string) (map[Phase]PhaseLog, error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: SecretName(name)}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return map[Phase]PhaseLog{}, nil
		}
		return nil, err
	}
	return Parse(s), nil
}

// Parse reads the logs kept in s, the object's run log Secret, by phase.
func Parse(s *corev1.Secret) map[Phase]PhaseLog {
	out := map[Phase]PhaseLog{}
	for _, p := range Phases {
		state, ok := s.Annotations[stateAnnotation(p)]
		if !ok {
			continue
		}
		l := PhaseLog{Phase: p, State: state, Text: string(s.Data[Key(p)])}
		l.StartedAt, _ = time.Parse(time.RFC3339, s.Annotations[startedAnnotation(p)])
		l.FinishedAt, _ = time.Parse(time.RFC3339, s.Annotations[finishedAnnotation(p)])
		out[p] = l
	}
	return out
}
