package runs

import (
	"cmp"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/redact"
	"github.com/landform-dev/landform/internal/runlog"
	"github.com/landform-dev/landform/runner"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// fixture is one tracker with a fake placer, on a real API server that
// keeps the run logs.
type fixture struct {
	t       *testing.T
	g       *WithT
	placer  *fakePlacer
	tokens  *fakeTokens
	tracker *Tracker
	obj     *infrav1.Terraform
	tarball string
	// collected are the keys the drain collected.
	collected chan types.NamespacedName
	stop      context.CancelFunc
	stopped   chan error
	// client is the tracker's; configure may set it (default env.Client).
	client client.Client
}

func newFixture(t *testing.T, slots int, configure func(*fixture)) *fixture {
	g := NewWithT(t)
	ns := env.Namespace(t)
	f := &fixture{t: t, g: g, placer: newFakePlacer(), tokens: &fakeTokens{reusable: true},
		obj: env.Terraform(t, ns, "app"), collected: make(chan types.NamespacedName, 8), stopped: make(chan error, 1)}
	f.tarball = filepath.Join(t.TempDir(), "module.tar.gz")
	g.Expect(os.WriteFile(f.tarball, []byte("module"), 0o600)).To(Succeed())
	if configure != nil {
		configure(f)
	}
	f.tracker = New(Config{
		Placer: f.placer, Tokens: f.tokens, Client: cmp.Or[client.Client](f.client, env.Client), Slots: slots, Drain: 2 * time.Second,
		Collect: reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
			f.collected <- req.NamespacedName
			return reconcile.Result{}, nil
		}),
		Log: zap.New(zap.WriteTo(os.Stderr)),
	})
	ctx, cancel := context.WithCancel(context.Background())
	f.stop = cancel
	go func() { f.stopped <- f.tracker.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-f.stopped
	})
	return f
}

func (f *fixture) key() types.NamespacedName { return client.ObjectKeyFromObject(f.obj) }

func (f *fixture) request(id, action string, priority Priority) Request {
	return Request{
		Object:   f.obj.DeepCopy(),
		Run:      infrav1.RunStatus{ID: id, Action: action, InputsDigest: "sha256:inputs"},
		Spec:     runner.RunSpec{ID: id, Action: runner.Plan, Deadline: time.Minute},
		Priority: priority,
		Workspace: &Workspace{Tarball: f.tarball, Spec: func(obj *infrav1.Terraform, backend map[string]string) *runnerpb.WorkspaceSpec {
			return &runnerpb.WorkspaceSpec{Path: ".", BackendConfig: backend}
		}},
		Redactor: redact.New("hunter2"),
	}
}

func (f *fixture) launch(req Request) *Handle {
	f.t.Helper()
	h, err := f.tracker.Launch(req)
	f.g.Expect(err).NotTo(HaveOccurred())
	return h
}

// start launches run id of action, as a user's, and waits until it runs
// on a runner.
func (f *fixture) start(id, action string) (*Handle, *fakeRunner, *fakeRun) {
	f.t.Helper()
	h := f.launch(f.request(id, action, User))
	fr, run := f.running(id)
	return h, fr, run
}

// running waits until run id is started on a runner and returns both.
func (f *fixture) running(id string) (*fakeRunner, *fakeRun) {
	f.t.Helper()
	var fr *fakeRunner
	f.g.Eventually(func() *fakeRunner {
		f.placer.mu.Lock()
		defer f.placer.mu.Unlock()
		fr = f.placer.byRun[id]
		return fr
	}, 10*time.Second, 10*time.Millisecond).NotTo(BeNil(), "run %s started", id)
	return fr, fr.run(id)
}

func (f *fixture) ended(h *Handle) (*runner.RunResult, error) {
	f.t.Helper()
	f.g.Eventually(h.Done(), 10*time.Second).Should(BeClosed(), "run %s ended", h.ID())
	// As the collector does: the final log is written beside the result.
	f.g.Expect(h.AwaitLog(10*time.Second)).To(BeTrue(), "run %s's final log written", h.ID())
	return h.Result()
}

func (f *fixture) slotsInUse() int {
	inUse, _ := f.tracker.slots.Stats()
	return inUse
}

// planLog is the plan log the run kept, as a user reads it.
func (f *fixture) planLog() runlog.PhaseLog {
	f.t.Helper()
	var logs map[runlog.Phase]runlog.PhaseLog
	f.g.Eventually(func() error {
		var err error
		logs, err = runlog.Read(context.Background(), env.Client, f.obj.Namespace, f.obj.Name)
		return err
	}, 10*time.Second).Should(Succeed())
	return logs[runlog.PhasePlan]
}

// seen is what the fakes saw: runner starts and attaches, runners stopped,
// workspaces uploaded, tokens issued, and slots held afterwards.
type seen struct{ starts, attaches, stops, uploads, tokens, slotsHeld int }

// oneRunner is one runner started, given the workspace and a token, and
// stopped, its slot given back.
var oneRunner = seen{starts: 1, stops: 1, uploads: 1, tokens: 1}

func TestRuns(t *testing.T) {
	planned := &runner.RunResult{Plan: &runner.PlanOutput{Result: &runnerpb.PlanResult{HasChanges: true, Add: 1}}}
	cases := []struct {
		name string
		// slots bounds the runs in flight; configure sets the fakes up.
		slots     int
		configure func(*fixture)
		// do drives the tracker and returns how the run under test ended.
		do func(f *fixture) (*runner.RunResult, error)
		// The run's result, or its error's kind.
		wantResult *runner.RunResult
		wantErr    func(error) bool
		seen       seen
	}{{
		name: "a plan on a new runner: slot, runner, workspace, token, log",
		do: func(f *fixture) (*runner.RunResult, error) {
			h, fr, run := f.start("run-1", string(runner.Plan))
			run.log("Plan: 1 to add (password hunter2)")
			run.end(planned, nil)
			res, err := f.ended(h)
			f.g.Expect(fr.tokens).To(Equal([]string{"token-1"}))
			f.g.Expect(f.tracker.Runner(h)).To(Equal("fake runner 1"))
			log := f.planLog()
			f.g.Expect(log.State).To(Equal(runlog.StateSucceeded))
			f.g.Expect(log.Text).To(ContainSubstring("Plan: 1 to add"))
			f.g.Expect(log.Text).NotTo(ContainSubstring("hunter2"), "the log is redacted")
			f.tracker.Finish(h).Stop()
			return res, err
		},
		wantResult: planned,
		seen:       oneRunner,
	}, {
		name: "the plan's runner is kept for its apply: no new runner, upload or token",
		do: func(f *fixture) (*runner.RunResult, error) {
			h, _, run := f.start("run-plan", string(runner.Plan))
			run.end(planned, nil)
			f.ended(h)
			idle := f.tracker.Finish(h)
			f.g.Expect(idle.For("sha256:other")).To(BeNil(), "another workspace is not on that runner")
			apply := f.request("run-apply", string(runner.Apply), User)
			apply.Workspace, apply.Reuse = nil, idle.For("sha256:inputs")
			f.g.Expect(f.slotsInUse()).To(Equal(1), "the idle runner keeps its slot")
			h = f.launch(apply)
			fr, run := f.running("run-apply")
			f.g.Expect(fr.name).To(Equal("fake runner 1"))
			run.end(&runner.RunResult{}, nil)
			res, err := f.ended(h)
			f.g.Expect(fr.tokens).To(Equal([]string{"token-1", ""}), "the apply keeps the plan's token")
			idle.Stop() // taken: does nothing
			f.tracker.Finish(h).Stop()
			return res, err
		},
		wantResult: &runner.RunResult{},
		seen:       oneRunner,
	}, {
		name: "an idle runner nobody takes is stopped and frees its slot",
		do: func(f *fixture) (*runner.RunResult, error) {
			h, _, run := f.start("run-1", string(runner.Plan))
			run.end(planned, nil)
			res, err := f.ended(h)
			f.tracker.Finish(h).Stop()
			return res, err
		},
		wantResult: planned,
		seen:       oneRunner,
	}, {
		name: "abandoned: terraform is interrupted, then its runner stopped and its slot freed",
		do: func(f *fixture) (*runner.RunResult, error) {
			h, fr, _ := f.start("run-1", string(runner.Apply))
			f.tracker.Abandon(f.key())
			res, err := f.ended(h)
			f.g.Eventually(func() []string { fr.mu.Lock(); defer fr.mu.Unlock(); return fr.cancelled }).Should(Equal([]string{"run-1"}))
			f.g.Eventually(f.slotsInUse).Should(Equal(0))
			f.g.Expect(f.tracker.Get(f.key())).To(BeNil())
			return res, err
		},
		wantErr: func(err error) bool { e, ok := runner.AsError(err); return ok && e.Reason == runner.ReasonInterrupted },
		seen:    oneRunner,
	}, {
		name: "attach after a restart: the run's log and result, nothing started again",
		do: func(f *fixture) (*runner.RunResult, error) {
			// An earlier controller process started the run.
			first := newFakePlacer()
			rn, _ := first.Start(context.Background(), f.obj, "run-1")
			fr := first.runners[0]
			fr.p = f.placer
			rn.Client.StartRun(context.Background(), runner.RunSpec{ID: "run-1", StateToken: "old"})
			fr.run("run-1").log("creating...")
			f.placer.byRun["run-1"] = fr

			h, err := f.tracker.Attach(Request{Object: f.obj.DeepCopy(), Run: infrav1.RunStatus{ID: "run-1", Action: string(runner.Plan)}, Redactor: redact.New()})
			f.g.Expect(err).NotTo(HaveOccurred())
			fr.run("run-1").end(planned, nil)
			res, err := f.ended(h)
			f.g.Expect(f.planLog().Text).To(ContainSubstring("creating..."))
			return res, err
		},
		wantResult: planned,
		seen:       seen{attaches: 1},
	}, {
		name: "attach to a runner that is gone: the run is lost",
		do: func(f *fixture) (*runner.RunResult, error) {
			h, err := f.tracker.Attach(Request{Object: f.obj.DeepCopy(), Run: infrav1.RunStatus{ID: "run-gone", Action: string(runner.Apply)}, Redactor: redact.New()})
			f.g.Expect(err).NotTo(HaveOccurred())
			return f.ended(h)
		},
		wantErr: func(err error) bool { var l *LostError; return errors.As(err, &l) },
		seen:    seen{attaches: 1},
	}, {
		name: "a broken watch resumes from the next line while the runner lives",
		do: func(f *fixture) (*runner.RunResult, error) {
			h, fr, run := f.start("run-1", string(runner.Plan))
			run.log("one")
			run.log("two")
			fr.breakWatches()
			run.log("three")
			run.end(planned, nil)
			res, err := f.ended(h)
			f.g.Expect(f.planLog().Text).To(Equal("one\ntwo\nthree\n"), "each line once")
			f.tracker.Finish(h).Stop()
			return res, err
		},
		wantResult: planned,
		seen:       oneRunner,
	}, {
		name: "a runner that dies while watched: the run is lost",
		do: func(f *fixture) (*runner.RunResult, error) {
			h, fr, _ := f.start("run-1", string(runner.Apply))
			fr.run("run-1").log("creating...")
			fr.mu.Lock()
			fr.alive = false
			fr.mu.Unlock()
			fr.breakWatches()
			res, err := f.ended(h)
			f.tracker.Finish(h).Stop()
			return res, err
		},
		wantErr: func(err error) bool { var l *LostError; return errors.As(err, &l) && strings.Contains(l.Why, "exited") },
		seen:    oneRunner,
	}, {
		name: "a runner the placement refuses: a stalling start error, slot given back",
		configure: func(f *fixture) {
			f.placer.startErr = &placement.Error{Reason: infrav1.RunnerImageNotAllowedReason, Message: "image hunter2 not allowed", Stalling: true}
		},
		do: func(f *fixture) (*runner.RunResult, error) {
			res, err := f.ended(f.launch(f.request("run-1", string(runner.Plan), User)))
			f.g.Expect(err.Error()).NotTo(ContainSubstring("hunter2"), "redacted")
			return res, err
		},
		wantErr: func(err error) bool {
			var s *StartError
			return errors.As(err, &s) && s.Stalling && s.Reason == infrav1.RunnerImageNotAllowedReason
		},
		seen: seen{starts: 1, tokens: 1},
	}, {
		name:  "one slot: a drift check waits behind the run holding it, and gets it after",
		slots: 1,
		do: func(f *fixture) (*runner.RunResult, error) {
			first, _, run := f.start("run-1", string(runner.Plan))
			other := f.obj.DeepCopy()
			other.Name = "other"
			drift := f.request("run-2", string(runner.Plan), Background)
			drift.Object = other
			second := f.launch(drift)
			f.g.Consistently(func() string { return f.tracker.Runner(second) }, 300*time.Millisecond).Should(BeEmpty(), "waits for a slot")
			run.end(planned, nil)
			f.ended(first)
			f.tracker.Finish(first).Stop()
			_, run2 := f.running("run-2")
			run2.end(planned, nil)
			res, err := f.ended(second)
			f.tracker.Finish(second).Stop()
			return res, err
		},
		wantResult: planned,
		seen:       seen{starts: 2, stops: 2, uploads: 2, tokens: 2},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, cmp.Or(tc.slots, 4), tc.configure)
			res, err := tc.do(f)
			if tc.wantErr != nil {
				f.g.Expect(err).To(HaveOccurred())
				f.g.Expect(tc.wantErr(err)).To(BeTrue(), "error %T: %v", err, err)
			} else {
				f.g.Expect(err).NotTo(HaveOccurred())
				f.g.Expect(res).To(Equal(tc.wantResult))
			}
			f.g.Eventually(func() seen {
				var got seen
				got.starts, got.attaches, got.stops = f.placer.counts()
				f.placer.mu.Lock()
				for _, fr := range f.placer.runners {
					fr.mu.Lock()
					got.uploads += fr.uploads
					fr.mu.Unlock()
				}
				f.placer.mu.Unlock()
				got.tokens, got.slotsHeld = f.tokens.count(), f.slotsInUse()
				return got
			}, 5*time.Second).Should(Equal(tc.seen), "starts, attaches, stops, uploads, tokens, slots held")
		})
	}
}

// TestFinishStopsARunnerInTheBackground: the runner of a finished apply
// is stopped after Finish returns, its slot held until it is gone, local
// or detached; a runner its placement keeps for another run (a runner Pod
// with reuse) is stopped before Finish returns.
func TestFinishStopsARunnerInTheBackground(t *testing.T) {
	for _, tc := range []struct {
		name           string
		durable, parks bool
	}{{"local", false, false}, {"detached local", true, false}, {"parked Pod", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			hold := make(chan struct{})
			f := newFixture(t, 4, func(f *fixture) { f.placer.durable, f.placer.parks, f.placer.stopping = tc.durable, tc.parks, hold })
			h, _, run := f.start("run-1", string(runner.Apply))
			run.end(&runner.RunResult{}, nil)
			f.ended(h)
			finished := make(chan struct{})
			go func() {
				f.tracker.Finish(h)
				close(finished)
			}()
			if tc.parks {
				f.g.Consistently(finished, 200*time.Millisecond).ShouldNot(BeClosed(), "a stop that parks is waited for")
			} else {
				f.g.Eventually(finished).Should(BeClosed(), "the stop is not waited for")
				f.g.Consistently(f.slotsInUse, 200*time.Millisecond).Should(Equal(1), "the slot is held until the runner is gone")
			}
			_, _, stops := f.placer.counts()
			f.g.Expect(stops).To(Equal(0))
			close(hold)
			f.g.Eventually(finished).Should(BeClosed())
			f.g.Eventually(f.slotsInUse).Should(Equal(0))
			_, _, stops = f.placer.counts()
			f.g.Expect(stops).To(Equal(1))
		})
	}
}

// TestDrain: on shutdown local runs get the drain timeout to finish and
// are collected; what remains then is interrupted, and collected too.
// Runner Pods carry on: the watch detaches and nothing is interrupted.
func TestDrain(t *testing.T) {
	t.Run("local: finished within the drain, collected", func(t *testing.T) {
		f := newFixture(t, 4, nil)
		h, fr, run := f.start("run-1", string(runner.Apply))
		f.stop()
		f.g.Consistently(f.stopped, 200*time.Millisecond).ShouldNot(Receive(), "drains")
		_, err := f.tracker.Launch(f.request("run-2", string(runner.Plan), User))
		f.g.Expect(err).To(MatchError(ErrShuttingDown))
		run.end(&runner.RunResult{}, nil)
		f.g.Eventually(f.collected, 5*time.Second).Should(Receive(Equal(f.key())))
		f.g.Eventually(f.stopped, 5*time.Second).Should(Receive(BeNil()))
		_, err = h.Result()
		f.g.Expect(err).NotTo(HaveOccurred())
		f.g.Expect(fr.cancelled).To(BeEmpty(), "not interrupted")
		f.stopped <- nil // for the cleanup
	})
	t.Run("local: the drain times out, the run is interrupted and collected", func(t *testing.T) {
		f := newFixture(t, 4, nil)
		h, fr, _ := f.start("run-1", string(runner.Apply))
		f.stop()
		f.g.Eventually(f.collected, 10*time.Second).Should(Receive(Equal(f.key())))
		f.g.Eventually(f.stopped, 5*time.Second).Should(Receive(BeNil()))
		_, err := h.Result()
		e, ok := runner.AsError(err)
		f.g.Expect(ok && e.Reason == runner.ReasonInterrupted).To(BeTrue(), "interrupted: %v", err)
		f.g.Expect(fr.cancelled).To(Equal([]string{"run-1"}))
		f.stopped <- nil
	})
	t.Run("local: two runs past the deadline are both interrupted", func(t *testing.T) {
		f := newFixture(t, 4, nil)
		h1 := f.launch(f.request("run-1", string(runner.Apply), User))
		other := f.request("run-2", string(runner.Apply), User)
		other.Object.Name = "other"
		h2 := f.launch(other)
		f.running("run-1")
		f.running("run-2")
		f.stop()
		// The deadline fires once: the drain must not wait for the
		// second run to end on its own.
		f.g.Eventually(f.stopped, 10*time.Second).Should(Receive(BeNil()))
		for _, h := range []*Handle{h1, h2} {
			_, err := h.Result()
			e, ok := runner.AsError(err)
			f.g.Expect(ok && e.Reason == runner.ReasonInterrupted).To(BeTrue(), "%s interrupted: %v", h.ID(), err)
		}
		f.stopped <- nil
	})
	t.Run("pods: the run carries on, the watch detaches", func(t *testing.T) {
		f := newFixture(t, 4, func(f *fixture) { f.placer.durable = true })
		h, fr, _ := f.start("run-1", string(runner.Apply))
		f.stop()
		f.g.Eventually(f.stopped, 5*time.Second).Should(Receive(BeNil()))
		_, err := f.ended(h)
		f.g.Expect(err).To(MatchError(ErrDetached))
		f.g.Expect(fr.cancelled).To(BeEmpty(), "not interrupted")
		f.g.Expect(fr.isAlive()).To(BeTrue(), "the runner is not stopped")
		f.g.Expect(f.collected).NotTo(Receive())
		f.stopped <- nil
	})
}

// A copy of the object that does not record the run this process has in
// flight is behind; one that records it, or any copy once the run is
// finished, is not.
func TestBehind(t *testing.T) {
	f := newFixture(t, 4, nil)
	h, _, run := f.start("run-1", string(runner.Plan))
	stale := f.obj.DeepCopy()
	f.g.Expect(f.tracker.Behind(stale)).To(BeTrue(), "no status.run yet")
	stale.Status.Run = &infrav1.RunStatus{ID: "run-0"}
	f.g.Expect(f.tracker.Behind(stale)).To(BeTrue(), "an older run")
	current := f.obj.DeepCopy()
	current.Status.Run = &infrav1.RunStatus{ID: "run-1"}
	f.g.Expect(f.tracker.Behind(current)).To(BeFalse())
	run.end(&runner.RunResult{}, nil)
	f.ended(h)
	f.tracker.Finish(h).Stop()
	f.g.Expect(f.tracker.Behind(stale)).To(BeFalse(), "nothing in flight")
}
