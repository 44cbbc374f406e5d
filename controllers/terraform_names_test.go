package controllers

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/runlog"
)

// longName is a valid object name of n characters; names of one test share
// their first characters, so shortened names must still keep them apart.
func longName(n int, last string) string {
	return strings.Repeat("n", n-len(last)) + last
}

// Any name the CRD accepts works: objects named with 63, 64, 200 and 253
// characters (one with a workspace of the maximum length, one with dots),
// side by side in one namespace, apply, write their outputs, keep their
// logs, record events and are destroyed with everything Landform made for
// them. A name that fitted before keeps exactly its state Secret and labels.
func TestAnyValidName(t *testing.T) {
	ns := newNamespace(t)
	newGitRepository(t, ns, "repo", artifacts.publish(fileModule()))
	cases := []struct {
		name, workspace string
	}{
		{name: longName(63, "a")},
		{name: longName(64, "b")},
		{name: longName(200, "c")},
		{name: longName(200, "d.e")},
		{name: longName(253, "f"), workspace: strings.Repeat("w", 63)},
	}
	for i, tc := range cases {
		t.Run(strings.TrimLeft(tc.name, "n"), func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			ctx := context.Background()
			path := effectPath(t)
			outputs := "out-" + string(rune('a'+i))
			tf := newTerraform(t, ns, tc.name, func(tf *infrav1.Terraform) {
				tf.Spec.Vars = fileVars(path, "content of "+tc.name[len(tc.name)-3:])
				tf.Spec.Workspace = tc.workspace
				tf.Spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{Name: outputs}
			})
			obj := waitReady(t, tf)
			g.Expect(readFile(path)).To(Equal("content of " + tc.name[len(tc.name)-3:]))
			g.Expect(secretData(g, ns, outputs)).To(HaveKey("path"), "outputs written")
			g.Expect(conditions.IsTrue(obj, infrav1.OutputsWrittenCondition)).To(BeTrue())

			// The state, where the engine and Landform both look for it,
			// with the engine's own labels.
			state := &corev1.Secret{}
			g.Expect(k8sClient.Get(ctx, keyOf(ns, names.StateSecret(obj)), state)).To(Succeed())
			g.Expect(state.Data).To(HaveKey("tfstate"), "the engine wrote its state there")
			g.Expect(state.Labels).To(HaveKeyWithValue("tfstateSecretSuffix", names.SecretSuffix(obj)))
			g.Expect(state.Labels).To(HaveKeyWithValue("tfstateWorkspace", obj.GetWorkspace()))
			if len(tc.name) <= 63 {
				g.Expect(state.Name).To(Equal("tfstate-default-"+tc.name), "a name that fitted keeps its state Secret")
				g.Expect(state.Labels).To(HaveKeyWithValue("tfstateSecretSuffix", tc.name))
			}
			g.Expect(k8sClient.Get(ctx, keyOf(ns, names.StateLease(obj)), &coordinationv1.Lease{})).To(Succeed())
			g.Expect(k8sClient.Get(ctx, keyOf(ns, names.StateIdentity(obj)), &corev1.ServiceAccount{})).To(Succeed())

			// Landform's Secrets carry a label that finds them, and the CLI
			// finds the object's logs and lock.
			out := &corev1.Secret{}
			g.Expect(k8sClient.Get(ctx, keyOf(ns, outputs), out)).To(Succeed())
			g.Expect(out.Labels).To(HaveKeyWithValue(infrav1.OwnerNameLabel, names.Label(tc.name)))
			logs := &corev1.Secret{}
			g.Expect(k8sClient.Get(ctx, keyOf(ns, runlog.SecretName(tc.name)), logs)).To(Succeed())
			g.Expect(logs.Labels).To(HaveKeyWithValue(infrav1.OwnerNameLabel, names.Label(tc.name)))
			stdout, stderr, err := runCLI(ns, "logs", tc.name, "--phase", "apply")
			g.Expect(err).NotTo(HaveOccurred(), stderr)
			g.Expect(stdout).To(ContainSubstring("Apply complete"))
			stdout, stderr, err = runCLI(ns, "unlock", tc.name)
			g.Expect(err).NotTo(HaveOccurred(), stderr)
			g.Expect(stdout).To(ContainSubstring("is not locked"))

			// Events are recorded for it.
			g.Eventually(func(g Gomega) {
				var events corev1.EventList
				g.Expect(k8sClient.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
				var reasons []string
				for _, e := range events.Items {
					if e.InvolvedObject.UID == obj.UID {
						reasons = append(reasons, e.Reason)
					}
				}
				g.Expect(reasons).NotTo(BeEmpty())
			}).WithTimeout(waitTimeout).WithPolling(pollEvery).Should(Succeed())

			// Deletion destroys, and finds everything it must delete.
			deleteAndWait(t, tf)
			g.Expect(readFile(path)).To(Equal("<missing>"), "destroyed")
			for _, o := range []client.Object{
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: names.StateSecret(obj)}},
				&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: names.StateLease(obj)}},
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: outputs}},
				&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: names.StateIdentity(obj)}},
			} {
				err := k8sClient.Get(ctx, keyOf(ns, o.GetName()), o)
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s left: %v", o, o.GetName(), err)
			}
		})
	}
}

// A runner Pod of an object with a 253-character name is accepted by the
// API server: its name is a DNS label, its labels are valid and select it.
// (envtest has no kubelet: the Pod never starts.)
func TestLongNameRunnerPod(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	newGitRepository(t, ns, "repo", artifacts.publish(fileModule()))
	g.Expect(k8sClient.Create(context.Background(), &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "landform-runner"},
	})).To(Succeed())
	name := longName(253, "pod")
	tf := newTerraform(t, ns, name, func(tf *infrav1.Terraform) {
		tf.Labels = map[string]string{podPlacementLabel: "pod"}
		tf.Spec.Vars = fileVars(effectPath(t), "x")
	})
	obj := waitNotReady(t, tf, infrav1.RunnerStartTimeoutReason)
	g.Expect(readyMessageOf(obj)).To(ContainSubstring(names.RunnerPodPrefix(name) + names.RunnerPodInfix))
}

// The longest name, workspace and secretSuffix the CRD accepts are
// accepted (and work: TestAnyValidName); one character more is refused at
// admission (TestAPIValidation for the spec). An uppercase workspace names
// no Secret with the module's own backend, and is accepted there.
func TestNameLimitsAtAdmission(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	create := func(name string, mutate func(*infrav1.Terraform)) error {
		tf := &infrav1.Terraform{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       infrav1.TerraformSpec{SourceRef: infrav1.SourceReference{Kind: "GitRepository", Name: "repo"}, Suspend: true},
		}
		mutate(tf)
		return k8sClient.Create(context.Background(), tf)
	}
	longest := func(tf *infrav1.Terraform) {
		tf.Spec.Workspace = strings.Repeat("w", 63)
		tf.Spec.BackendConfig = &infrav1.BackendConfig{SecretSuffix: strings.Repeat("s", 63)}
	}
	g.Expect(create(longName(253, "x"), longest)).To(Succeed())
	g.Expect(create(longName(254, "x"), longest)).To(MatchError(ContainSubstring("metadata.name")))
	g.Expect(create("custom", func(tf *infrav1.Terraform) {
		tf.Spec.Workspace = "Prod_1"
		tf.Spec.BackendConfig = &infrav1.BackendConfig{CustomConfiguration: `terraform { backend "local" {} }`}
	})).To(Succeed())
}
