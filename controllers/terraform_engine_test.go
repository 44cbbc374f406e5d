package controllers

import (
	"context"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/testenv"
	"github.com/landform-dev/landform/internal/testenv/enginemirror"
	"github.com/landform-dev/landform/internal/tfstate"
)

const engineModule = `
resource "terraform_data" "x" {
  input = "engine"
}

output "x" {
  value = terraform_data.x.output
}
`

// newEngineTerraform is an object on engineModule with engine e.
func newEngineTerraform(t *testing.T, ns, name string, e infrav1.EngineSpec) *infrav1.Terraform {
	return newTerraform(t, ns, name, func(tf *infrav1.Terraform) {
		tf.Spec.Path = "modules/engine"
		tf.Spec.Engine = &e
	})
}

// stateEngineVersion is the terraform_version the engine wrote into the
// object's state: the version that really ran.
func stateEngineVersion(g Gomega, obj *infrav1.Terraform) string {
	data := secretData(g, obj.Namespace, names.StateSecret(obj))
	g.Expect(data).NotTo(BeNil(), "no state Secret")
	st, err := testenv.ReadState(data)
	g.Expect(err).NotTo(HaveOccurred())
	return st.TerraformVersion
}

// Objects choose their engine: one pinned to Terraform 1.5.7 (downloaded
// from the suite's release mirror, verified with its key) and one to
// OpenTofu 1.12 (the runner's own binary: nothing downloaded) run side by
// side, each state written by the engine and version asked for. A
// constraint resolves to the newest version the mirror lists, recorded in
// the plan's status; a second object on the same version downloads
// nothing.
func TestEnginePerObject(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	newGitRepository(t, ns, "repo", artifacts.publish(map[string]string{"modules/engine/main.tf": engineModule}))
	archive := enginemirror.ArchivePath("terraform", "1.5.7")
	before := terraformMirror.Requests(archive)

	tf := newEngineTerraform(t, ns, "pinned-terraform", infrav1.EngineSpec{Name: "terraform", Version: "~> 1.4"})
	tofu := newEngineTerraform(t, ns, "pinned-opentofu", infrav1.EngineSpec{Name: "opentofu", Version: tofuVersion})
	for obj, want := range map[*infrav1.Terraform]string{tf: "1.5.7", tofu: tofuVersion} {
		cur := waitReady(t, obj)
		g.Expect(cur.Status.Plan.Engine).To(Equal(&infrav1.EngineStatus{Name: obj.Spec.Engine.Name, Version: want}), describe(cur))
		g.Expect(stateEngineVersion(g, cur)).To(Equal(want))
	}
	downloads := terraformMirror.Requests(archive) - before
	g.Expect(downloads).To(BeNumerically("<=", 1), "one download of Terraform 1.5.7 at most (an earlier test may have cached it)")

	again := newEngineTerraform(t, ns, "pinned-again", infrav1.EngineSpec{Name: "terraform", Version: "1.5.7"})
	g.Expect(stateEngineVersion(g, waitReady(t, again))).To(Equal("1.5.7"))
	g.Expect(terraformMirror.Requests(archive)-before).To(Equal(downloads), "the installed version is used again: nothing downloaded")
}

// An engine that does not verify runs nothing: an archive whose checksum
// does not match (the mirror's Terraform 1.4.6) and checksums signed with
// another key than the configured one (the OpenTofu mirror's) are
// EngineVerificationFailed, Stalled, with no state written over the empty
// one the claim made; a version no
// source offers is EngineNotFound, saying where it looked.
func TestEngineThatDoesNotVerifyRunsNothing(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	newGitRepository(t, ns, "repo", artifacts.publish(map[string]string{"modules/engine/main.tf": engineModule}))
	for name, engine := range map[string]infrav1.EngineSpec{
		"tampered":     {Name: "terraform", Version: "1.4.6"},
		"other-signer": {Name: "opentofu", Version: "1.11.0"},
	} {
		obj := newEngineTerraform(t, ns, name, engine)
		cur := waitNotReady(t, obj, infrav1.EngineVerificationFailedReason)
		g.Expect(conditions.IsStalled(cur)).To(BeTrue(), describe(cur))
		g.Expect(conditions.GetMessage(cur, meta.ReadyCondition)).To(ContainSubstring("failed verification"))
		state := &corev1.Secret{}
		g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: names.StateSecret(cur)}, state)).To(Succeed())
		g.Expect(tfstate.IsSeed(state.Data[tfstate.DataKey], state.Annotations[tfstate.SeedAnnotation])).To(BeTrue(), "nothing ran: the state is the empty one the claim created")
	}

	missing := newEngineTerraform(t, ns, "missing", infrav1.EngineSpec{Name: "terraform", Version: "~> 0.12"})
	cur := waitNotReady(t, missing, infrav1.EngineNotFoundReason)
	g.Expect(conditions.GetMessage(cur, meta.ReadyCondition)).To(ContainSubstring(terraformMirror.URL("terraform")))
	g.Expect(cur.Status.Plan).To(BeNil())
}
