package runs

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/landform-dev/landform/internal/runlog"
	"github.com/landform-dev/landform/runner"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// The final log is written while the result is collected: the run is
// done before its log write returns, and AwaitLog waits for that write.
func TestFinalLogWrittenWhileCollected(t *testing.T) {
	release := make(chan struct{})
	var logWrites chan struct{}
	f := newFixture(t, 4, func(f *fixture) {
		logWrites = make(chan struct{}, 8)
		direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		f.client = interceptor.NewClient(direct, interceptor.Funcs{
			Apply: func(ctx context.Context, cl client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
				logWrites <- struct{}{}
				<-release // every log write waits until the test lets it go
				return cl.Apply(ctx, obj, opts...)
			},
		})
	})
	g := NewWithT(t)
	h, _, run := f.start("run-1", string(runner.Plan))
	run.log("Plan: 1 to add")
	run.end(&runner.RunResult{Plan: &runner.PlanOutput{Result: &runnerpb.PlanResult{HasChanges: true, Add: 1}}}, nil)
	g.Eventually(h.Done(), 10*time.Second).Should(BeClosed(), "the run ended while its log write is held")
	g.Eventually(logWrites, 10*time.Second).Should(Receive(), "the final log write started")
	g.Expect(h.AwaitLog(100*time.Millisecond)).To(BeFalse(), "the log is not written yet: AwaitLog gives up after its bound")

	close(release)
	g.Expect(h.AwaitLog(10*time.Second)).To(BeTrue(), "AwaitLog returns once the log is written")
	logs, err := runlog.Read(context.Background(), env.Client, f.obj.Namespace, f.obj.Name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(logs[runlog.PhasePlan].State).To(Equal(runlog.StateSucceeded), "written before AwaitLog returned")
	g.Expect(logs[runlog.PhasePlan].Text).To(ContainSubstring("Plan: 1 to add"))
	f.tracker.Finish(h).Stop()
}
