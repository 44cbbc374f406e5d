package controllers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/keptartifact"
	"github.com/landform-dev/landform/internal/testenv"
)

// counterModule counts creates and destroys of one terraform_data in the
// file var.effects. It uses ../shared, so a destroy needs the whole
// artifact, not only its own directory. marker makes the artifact (and its
// digest) this test's own, and stands for a secret an artifact may hold.
func counterModule(marker string, extra map[string]string) map[string]string {
	files := map[string]string{
		"modules/counter/main.tf": `# ` + marker + `
variable "effects" { type = string }
module "shared" { source = "../shared" }
resource "terraform_data" "this" {
  input            = var.effects
  triggers_replace = [module.shared.marker]
  provisioner "local-exec" {
    command = "echo created >> ${self.input}"
  }
  provisioner "local-exec" {
    when    = destroy
    command = "echo destroyed >> ${self.input}"
  }
}
`,
		"modules/shared/main.tf": `output "marker" { value = "shared" }` + "\n",
	}
	for k, v := range extra {
		files[k] = v
	}
	return files
}

// counterApplied creates GitRepository "repo" with art, and object name on
// its counter module counting into a fresh effects file; it returns them
// once the object is Ready.
func counterApplied(t *testing.T, ns, name string, art *meta.Artifact) (*sourcev1.GitRepository, *infrav1.Terraform, string) {
	t.Helper()
	repo := newGitRepository(t, ns, "repo", art)
	effects := filepath.Join(t.TempDir(), "effects.txt")
	tf := newTerraform(t, ns, name, func(tf *infrav1.Terraform) {
		tf.Spec.Path = "modules/counter"
		tf.Spec.Vars = []infrav1.Variable{{Name: "effects", Value: testenv.JSONValue(effects)}}
	})
	waitReady(t, tf)
	return repo, tf, effects
}

func nonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// keptSecretNames lists the Secrets holding name's kept artifact.
func keptSecretNames(g Gomega, ns, name string) []string {
	var list corev1.SecretList
	g.Expect(k8sClient.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, s := range list.Items {
		if strings.HasPrefix(s.Name, "tfartifact-"+name+"-") {
			out = append(out, s.Name)
		}
	}
	return out
}

// removeSource deletes the GitRepository and makes its artifact
// unreachable: gone from the artifact server and from the controller's
// artifact cache (the suite's, found by this test's own digest), so that
// only the kept copy is left.
func removeSource(t *testing.T, repo *sourcev1.GitRepository, art *meta.Artifact, cached bool) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8sClient.Delete(ctx, repo)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(repo), &sourcev1.GitRepository{}))
	}, waitTimeout, pollEvery).Should(BeTrue())

	g.Expect(os.Remove(filepath.Join(artifacts.dir, art.Path))).To(Succeed())
	resp, err := http.Get(art.URL)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusNotFound), "artifact still served")

	hexDigest := strings.TrimPrefix(art.Digest, "sha256:")
	matches, err := filepath.Glob(filepath.Join(os.TempDir(), "landform-controllers-*", "cache", "sha256", hexDigest+"*"))
	g.Expect(err).NotTo(HaveOccurred())
	if cached {
		g.Expect(matches).NotTo(BeEmpty(), "the controller's cache should have held the applied artifact")
	}
	for _, m := range matches {
		g.Expect(os.RemoveAll(m)).To(Succeed())
	}
}

// Flux prunes the GitRepository together with the Terraform object: the
// destroy runs once, from the artifact kept when it was applied, and the
// kept copy goes with the object.
func TestKeptArtifactDestroysAfterSourceIsGone(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	marker := "kept-marker-" + nonce()
	art := artifacts.publish(counterModule(marker, nil))
	repo, tf, effects := counterApplied(t, ns, "kept", art)
	obj := waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		k := obj.Status.LastAppliedArtifact
		g.Expect(k).NotTo(BeNil())
		g.Expect(*k).To(Equal(infrav1.AppliedArtifactStatus{Revision: art.Revision, Digest: art.Digest, Size: *art.Size, Kept: true}))
	})
	g.Expect(readFile(effects)).To(Equal("created\n"))

	// Kept in a Secret owned by the object (envtest runs no garbage
	// collector, so the reference is what can be checked of that).
	kept := &corev1.Secret{}
	g.Expect(k8sClient.Get(context.Background(), keyOf(ns, "tfartifact-kept-0"), kept)).To(Succeed())
	g.Expect(kept.Type).To(Equal(corev1.SecretType(keptartifact.SecretType)))
	g.Expect(kept.Labels).To(HaveKeyWithValue(infrav1.ManagedByLabel, infrav1.ManagedByValue))
	g.Expect(kept.Labels).To(HaveKeyWithValue(infrav1.OwnerNameLabel, "kept"))
	g.Expect(kept.OwnerReferences).To(HaveLen(1))
	g.Expect(kept.OwnerReferences[0].UID).To(Equal(obj.UID))
	g.Expect(kept.OwnerReferences[0].Controller).To(HaveValue(BeTrue()))

	removeSource(t, repo, art, true)
	deleteAndWait(t, tf)

	g.Expect(readFile(effects)).To(Equal("created\ndestroyed\n"), "destroyed exactly once")
	g.Expect(hasEvent(g, ns, "kept", infrav1.DeletingReason,
		fmt.Sprintf("source GitRepository %s/repo is gone; destroying with the last applied artifact %s", ns, art.Revision))).To(BeTrue())
	g.Expect(keptSecretNames(g, ns, "kept")).To(BeEmpty(), "the kept artifact goes with the object")
	g.Expect(secretData(g, ns, "tfstate-default-kept")).To(BeNil(), "state deleted")
	g.Expect(controllerLogs.String()).NotTo(ContainSubstring(marker), "the artifact's content stays out of the logs")
	var events corev1.EventList
	g.Expect(k8sClient.List(context.Background(), &events, client.InNamespace(ns))).To(Succeed())
	for _, e := range events.Items {
		g.Expect(e.Message).NotTo(ContainSubstring(marker))
	}
}

// An artifact over --kept-artifact-max-size (the suite runs the default) is
// not kept, with a Warning; deleting the object once its source is gone
// is Stalled with a message that says why and what to do, destroys
// nothing, and deletionPolicy: Orphan lets it go.
func TestKeptArtifactTooLargeStallsDeletion(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	blob := make([]byte, keptartifact.DefaultMaxSize+(1<<20))
	_, _ = rand.Read(blob)
	art := artifacts.publish(counterModule("large-"+nonce(), map[string]string{"assets/blob.bin": string(blob)}))
	g.Expect(*art.Size).To(BeNumerically(">", keptartifact.DefaultMaxSize))
	repo, tf, effects := counterApplied(t, ns, "large", art)
	waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		k := obj.Status.LastAppliedArtifact
		g.Expect(k).NotTo(BeNil())
		g.Expect(*k).To(Equal(infrav1.AppliedArtifactStatus{Revision: art.Revision, Digest: art.Digest, Size: *art.Size}))
	})
	g.Expect(hasEvent(g, ns, "large", infrav1.ArtifactNotKeptReason, "is larger than --kept-artifact-max-size")).To(BeTrue())
	g.Expect(keptSecretNames(g, ns, "large")).To(BeEmpty(), "nothing kept")
	g.Expect(readFile(effects)).To(Equal("created\n"))

	removeSource(t, repo, art, false)
	g.Expect(k8sClient.Delete(context.Background(), get(g, tf))).To(Succeed())
	obj := waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(conditions.IsStalled(obj)).To(BeTrue(), "Stalled")
		g.Expect(conditions.GetReason(obj, meta.StalledCondition)).To(Equal(infrav1.SourceNotFoundReason))
		g.Expect(conditions.IsFalse(obj, meta.ReadyCondition)).To(BeTrue())
	})
	msg := readyMessageOf(obj)
	for _, want := range []string{
		fmt.Sprintf("source GitRepository %s/repo is gone", ns),
		"too large to keep",
		"--kept-artifact-max-size",
		"restore the source (revision " + art.Revision + ")",
		"deletionPolicy: Orphan",
		infrav1.Finalizer,
	} {
		g.Expect(msg).To(ContainSubstring(want))
	}
	g.Expect(conditions.Has(obj, meta.ReconcilingCondition)).To(BeFalse(), "not retried")
	g.Consistently(func() string { return readFile(effects) }, 3*time.Second, time.Second).Should(Equal("created\n"), "nothing destroyed")

	g.Expect(k8sClient.Patch(context.Background(), get(g, tf), rawMergePatch([]byte(`{"spec":{"deletionPolicy":"Orphan"}}`)))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(context.Background(), keyOf(ns, "large"), &infrav1.Terraform{}))
	}, waitTimeout, pollEvery).Should(BeTrue(), func() string { return describe(get(NewWithT(t), tf)) })
	g.Expect(readFile(effects)).To(Equal("created\n"), "Orphan leaves the resources")
}
