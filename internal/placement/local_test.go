package placement

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/mtls"
	"github.com/landform-dev/landform/runner"
)

// A detached local runner outlives the placer that started it: another
// (a controller process after a restart, with the same CA and work dir)
// leaves its directory alone, finds it for its object, talks to it, and
// stops it; then it is gone for good.
func TestDetachedLocalRunnerIsFoundAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ca, err := mtls.NewCA("test-local-runners", time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	opts := runner.LocalOptions{Binary: runnerBinary, WorkDir: t.TempDir(), Detach: true, IdleExit: time.Minute}
	obj := &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app"}}

	first := &Local{CA: ca, Options: opts, Kubeconfig: kubeconfig}
	started, err := first.Start(ctx, obj, "run-1")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = started.Stop() })
	g.Expect(first.Durable()).To(BeTrue())

	second := &Local{CA: ca, Options: opts, Kubeconfig: kubeconfig}
	kept, err := second.RemoveStale()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kept).To(BeEmpty(), "no state left unsaved")
	dirs, _ := filepath.Glob(filepath.Join(opts.WorkDir, "landform-runner-*"))
	g.Expect(dirs).To(HaveLen(1), "a running runner's directory is kept")

	_, err = second.Attach(ctx, &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other"}}, "run-9")
	g.Expect(errors.Is(err, ErrRunnerGone)).To(BeTrue(), "another object's runner is not taken: %v", err)

	again, err := second.Attach(ctx, obj, "run-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Identity).To(Equal(started.Identity))
	alive, _ := again.Alive(ctx)
	g.Expect(alive).To(BeTrue())
	// The runner answers over mTLS with a client certificate of the kept
	// CA: it knows no such run.
	_, err = again.Client.WatchRun(ctx, "run-1", 0, func(int64, string) {})
	rerr, ok := runner.AsError(err)
	g.Expect(ok && rerr.Reason == runner.ReasonUnknownRun).To(BeTrue(), "the runner answered: %v", err)

	g.Expect(again.Stop()).To(Succeed())
	g.Eventually(func() bool { alive, _ := again.Alive(ctx); return alive }, 30*time.Second).Should(BeFalse(), "stopped")
	_, err = os.Stat(dirs[0])
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "its directory is removed")
	_, err = second.Attach(ctx, obj, "run-1")
	g.Expect(errors.Is(err, ErrRunnerGone)).To(BeTrue(), "gone for good: %v", err)
}
