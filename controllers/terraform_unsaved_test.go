package controllers

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/cli"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/tfstate"
	"github.com/landform-dev/landform/internal/unsavedstate"
)

// backendState is obj's state as its state Secret holds it, decoded.
func backendState(g Gomega, tf *infrav1.Terraform) map[string]any {
	raw, err := tfstate.Decompress(secretData(g, tf.Namespace, names.StateSecret(tf))[tfstate.DataKey])
	g.Expect(err).NotTo(HaveOccurred())
	var st map[string]any
	g.Expect(json.Unmarshal(raw, &st)).To(Succeed())
	return st
}

// setBackendState writes st into obj's state Secret, as the backend would.
func setBackendState(t *testing.T, tf *infrav1.Terraform, st map[string]any) {
	t.Helper()
	g := NewWithT(t)
	raw, err := json.Marshal(st)
	g.Expect(err).NotTo(HaveOccurred())
	var s corev1.Secret
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: tf.Namespace, Name: names.StateSecret(tf)}, &s)).To(Succeed())
	s.Data[tfstate.DataKey] = tfstate.Compress(raw)
	g.Expect(k8sClient.Update(context.Background(), &s)).To(Succeed())
}

func stateWith(st map[string]any, serial int, withResources bool) map[string]any {
	out := map[string]any{}
	for k, v := range st {
		out[k] = v
	}
	out["serial"] = serial
	if !withResources {
		out["resources"] = []any{}
	}
	return out
}

// requestReconcile asks for a reconcile, which plans again.
func requestReconcile(t *testing.T, tf *infrav1.Terraform) {
	t.Helper()
	annotate(t, tf.DeepCopy(), meta.ReconcileRequestAnnotation, time.Now().Format(time.RFC3339Nano))
}

func unsavedKept(g Gomega, tf *infrav1.Terraform) bool {
	err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: tf.Namespace, Name: unsavedstate.SecretName(tf)}, &corev1.Secret{})
	if apierrors.IsNotFound(err) {
		return false
	}
	g.Expect(err).NotTo(HaveOccurred())
	return true
}

// A state an apply could not save, kept in Secret tfunsaved-<name>-0
// while the backend still holds the state from before that apply, goes
// into the backend before the next run: the plan knows the resource and
// creates nothing (from the backend's old state it would create it again).
// A kept state the backend refuses (it holds a newer serial) stops every
// run with StateUnsaved until a person decides with `landform state push`.
func TestUnsavedStateIsWrittenBeforeTheNextRun(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	tf, path := newSlowTerraform(t, ns, "unsaved", 0, 2*time.Second)
	waitReady(t, tf)
	g.Expect(creates(path)).To(Equal(1))
	applied := backendState(g, tf)
	serial := int(applied["serial"].(float64))
	store := runsUnsaved
	keep := func(st map[string]any) {
		raw, err := json.Marshal(st)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = store.Keep(ctx, get(g, tf), "run-lost-its-state", raw, time.Now())
		g.Expect(err).NotTo(HaveOccurred())
	}

	// The apply's write never reached the backend; its state is kept.
	setBackendState(t, tf, stateWith(applied, serial-1, false))
	keep(stateWith(applied, serial, true))
	requestReconcile(t, tf)
	waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(conditions.IsReady(obj)).To(BeTrue())
		g.Expect(obj.Status.LastHandledReconcileAt).To(Equal(obj.Annotations[meta.ReconcileRequestAnnotation]))
	})
	g.Expect(creates(path)).To(Equal(1), "the plan started from the kept state")
	g.Expect(backendState(g, tf)["resources"]).NotTo(BeEmpty())
	g.Expect(unsavedKept(g, tf)).To(BeFalse(), "the kept state is gone once written")

	// Someone wrote a newer state since: the backend refuses the kept one.
	setBackendState(t, tf, stateWith(applied, serial+5, false))
	keep(stateWith(applied, serial+1, true))
	requestReconcile(t, tf)
	obj := waitNotReady(t, tf, infrav1.StateUnsavedReason)
	g.Expect(readyMessageOf(obj)).To(And(ContainSubstring("landform state push unsaved --force"), ContainSubstring("newer state")))
	g.Consistently(func(g Gomega) {
		g.Expect(get(g, tf).Status.Run).To(BeNil(), "nothing runs")
	}, 5*time.Second, 250*time.Millisecond).Should(Succeed())
	g.Expect(creates(path)).To(Equal(1))

	var out bytes.Buffer
	cmd := cli.NewCommand(cli.Options{Streams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out}})
	cmd.SetArgs([]string{"--kubeconfig", testKubeconfig, "-n", ns, "state", "push", "--force", tf.Name})
	g.Expect(cmd.Execute()).To(Succeed(), out.String())
	waitReady(t, tf)
	g.Expect(creates(path)).To(Equal(1), "the plan started from the state pushed")
	g.Expect(unsavedKept(g, tf)).To(BeFalse())
}
