package controllers

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/testenv"
)

// Every bad input ends in Ready=False with its own reason and a message that
// says what to fix, and the object recovers once it is fixed.
func TestBadInput(t *testing.T) {
	// onFileModule sets up the file module's object on a good source,
	// changed by mutate.
	onFileModule := func(mutate func(*infrav1.Terraform)) func(*testing.T, string) *infrav1.Terraform {
		return func(t *testing.T, ns string) *infrav1.Terraform {
			tf, _ := newFileTerraform(t, ns, "tf", "x", mutate)
			return tf
		}
	}
	// onArtifact sets up the file module's object on a source whose
	// status carries the artifact that artifact returns (nil: none yet).
	onArtifact := func(artifact func() *meta.Artifact) func(*testing.T, string) *infrav1.Terraform {
		return func(t *testing.T, ns string) *infrav1.Terraform {
			newGitRepository(t, ns, "repo", artifact())
			return newTerraform(t, ns, "tf", withFileVars(t))
		}
	}
	// republish fixes the source with a good artifact.
	republish := func(t *testing.T, ns string, _ *infrav1.Terraform) {
		setArtifact(t, repoOf(t, ns), artifacts.publish(fileModule()))
	}
	cases := []struct {
		name string
		// setup creates the broken situation and returns the object.
		setup func(t *testing.T, ns string) *infrav1.Terraform
		// reason and message are what Ready must say.
		reason, message string
		// applied: terraform ran before the failure (the outputs come last).
		applied bool
		// fix repairs the input.
		fix func(t *testing.T, ns string, tf *infrav1.Terraform)
	}{{
		name: "invalid HCL",
		setup: onArtifact(func() *meta.Artifact {
			files := fileModule()
			files["modules/file/broken.tf"] = `resource "landform_file" "broken" {`
			return artifacts.publish(files)
		}),
		reason:  infrav1.InvalidConfigurationReason,
		message: "push a new revision",
		fix:     republish,
	}, {
		name: "missing required variable",
		setup: func(t *testing.T, ns string) *infrav1.Terraform {
			newGitRepository(t, ns, "repo", artifacts.publish(fileModule()))
			return newTerraform(t, ns, "tf", func(tf *infrav1.Terraform) {
				tf.Spec.Vars = []infrav1.Variable{{Name: "content", Value: testenv.JSONValue("x")}}
			})
		},
		reason:  infrav1.MissingVariableReason,
		message: "spec.vars",
		fix: func(t *testing.T, ns string, tf *infrav1.Terraform) {
			updateSpec(t, tf, func(tf *infrav1.Terraform) { tf.Spec.Vars = fileVars(effectPath(t), "x") })
		},
	}, {
		name: "missing source",
		setup: func(t *testing.T, ns string) *infrav1.Terraform {
			return newTerraform(t, ns, "tf", withFileVars(t))
		},
		reason:  infrav1.SourceNotFoundReason,
		message: "fix spec.sourceRef",
		fix: func(t *testing.T, ns string, _ *infrav1.Terraform) {
			newGitRepository(t, ns, "repo", artifacts.publish(fileModule()))
		},
	}, {
		name:    "source not ready",
		setup:   onArtifact(func() *meta.Artifact { return nil }),
		reason:  infrav1.SourceNotReadyReason,
		message: "no artifact",
		fix:     republish,
	}, {
		name: "digest mismatch",
		setup: onArtifact(func() *meta.Artifact {
			a := artifacts.publish(fileModule())
			a.Digest = "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
			return a
		}),
		reason:  infrav1.DigestMismatchReason,
		message: "digest",
		fix:     republish,
	}, {
		name: "varsFrom names a missing Secret",
		setup: onFileModule(func(tf *infrav1.Terraform) {
			tf.Spec.VarsFrom = []infrav1.VarsReference{{Kind: "Secret", Name: "creds"}}
		}),
		reason:  infrav1.VarsNotFoundReason,
		message: "create it, or mark the reference optional",
		fix: func(t *testing.T, ns string, _ *infrav1.Terraform) {
			NewWithT(t).Expect(k8sClient.Create(context.Background(), &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
				StringData: map[string]string{"sensitive_content": "pa55word-fix"},
			})).To(Succeed())
		},
	}, {
		name: "outputs Secret owned by something else",
		setup: func(t *testing.T, ns string) *infrav1.Terraform {
			NewWithT(t).Expect(k8sClient.Create(context.Background(), &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
				StringData: map[string]string{"keep": "me"},
			})).To(Succeed())
			return onFileModule(func(tf *infrav1.Terraform) {
				tf.Spec.WriteOutputsToSecret = &infrav1.WriteOutputsToSecretSpec{Name: "taken"}
			})(t, ns)
		},
		reason:  infrav1.OutputSecretConflictReason,
		message: "taken",
		fix: func(t *testing.T, ns string, tf *infrav1.Terraform) {
			g := NewWithT(t)
			g.Expect(string(secretData(g, ns, "taken")["keep"])).To(Equal("me"), "the foreign Secret is untouched")
			// Refused before the plan: the module's file was never created.
			var path string
			g.Expect(json.Unmarshal(tf.Spec.Vars[0].Value.Raw, &path)).To(Succeed())
			g.Expect(path).NotTo(BeEmpty())
			g.Consistently(func() error { _, err := os.Stat(path); return err }, 2*time.Second).Should(MatchError(os.ErrNotExist), "nothing created")
			g.Expect(tf.Status.Plan).To(BeNil(), "nothing planned")
			NewWithT(t).Expect(k8sClient.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"}})).To(Succeed())
		},
	}, {
		name: "path escaping the artifact",
		setup: onFileModule(func(tf *infrav1.Terraform) {
			tf.Spec.Path = "../../etc"
		}),
		reason:  infrav1.InvalidPathReason,
		message: "must stay inside the source artifact",
		fix: func(t *testing.T, ns string, tf *infrav1.Terraform) {
			updateSpec(t, tf, func(tf *infrav1.Terraform) { tf.Spec.Path = "modules/file" })
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			ns := newNamespace(t)
			tf := tc.setup(t, ns)
			obj := waitNotReady(t, tf, tc.reason)
			g.Expect(readyMessageOf(obj)).To(ContainSubstring(tc.message))
			if !tc.applied {
				g.Expect(obj.Status.LastAppliedRevision).To(BeEmpty())
			}

			tc.fix(t, ns, obj)
			obj = waitReady(t, tf)
			g.Expect(obj.Status.LastAppliedRevision).NotTo(BeEmpty())
			g.Expect(conditions.Get(obj, meta.StalledCondition)).To(BeNil())
		})
	}
}

func withFileVars(t *testing.T) func(*infrav1.Terraform) {
	path := effectPath(t)
	return func(tf *infrav1.Terraform) { tf.Spec.Vars = fileVars(path, "x") }
}
