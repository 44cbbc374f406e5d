package controllers

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/testenv"
	"github.com/landform-dev/landform/runner"
)

// A plan that fails for a spec changed while it ran says nothing about the
// new spec: the new generation is planned and applied at once, not left
// stalled on the old failure (or held until spec.retryInterval).
func TestRunFailedForAnOlderSpecPlansTheNewOne(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	files := fileModule()
	// The plan reads its input from a FIFO: it blocks until the test
	// writes, and fails on what the test writes.
	files["modules/blocking/main.tf"] = `
variable "input" { type = string }
resource "terraform_data" "this" {
  input = jsondecode(file(var.input))
}
`
	newGitRepository(t, ns, "repo", artifacts.publish(files))
	fifo := filepath.Join(t.TempDir(), "input")
	g.Expect(syscall.Mkfifo(fifo, 0o600)).To(Succeed())
	path := effectPath(t)
	tf := newTerraform(t, ns, "outdated", func(tf *infrav1.Terraform) {
		tf.Spec.Path = "modules/blocking"
		tf.Spec.Vars = []infrav1.Variable{{Name: "input", Value: testenv.JSONValue(fifo)}}
		tf.Spec.RetryInterval = &metav1.Duration{Duration: time.Hour}
	})

	// A non-blocking open for writing succeeds once the engine reads.
	var w *os.File
	g.Eventually(func() (err error) {
		w, err = os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		return err
	}, waitTimeout, pollEvery).Should(Succeed(), "the plan reads the FIFO")
	defer w.Close()
	planning := get(g, tf)
	g.Expect(planning.Status.Run).NotTo(BeNil())
	g.Expect(planning.Status.Run.Action).To(Equal(string(runner.Plan)))

	// The spec moves on while the plan waits, and the controller sees it.
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"path": "modules/file", "vars": fileVars(path, "new")}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k8sClient.Patch(context.Background(), tf, rawMergePatch(patch))).To(Succeed())
	g.Eventually(func(g Gomega) {
		seen := &infrav1.Terraform{}
		g.Expect(controllerView.Get(context.Background(), client.ObjectKeyFromObject(tf), seen)).To(Succeed())
		g.Expect(seen.Generation).To(Equal(planning.Generation + 1))
	}, waitTimeout, pollEvery).Should(Succeed())

	// Then the old plan fails.
	_, err = w.WriteString("not json")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w.Close()).To(Succeed())

	waitReady(t, tf)
	g.Expect(readFile(path)).To(Equal("new"), "the new spec is applied")
	// Named in the metadata, not the message: a failure retried by new
	// runs is one event for notification-controller's duplicate filter.
	told := slices.ContainsFunc(eventsIn(g, ns), func(e corev1.Event) bool {
		return eventAbout(tf.Name, infrav1.PlanFailedReason, "plan run failed: ")(e) &&
			e.Annotations[runAnnotation] == planning.Status.Run.ID && !strings.Contains(e.Message, planning.Status.Run.ID)
	})
	g.Expect(told).To(BeTrue(), "the old run's failure is still told, its run in the metadata: %s", eventsOf(g, ns))
}
