package controllers

import (
	"context"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// newExternalArtifact creates an ExternalArtifact as an ArtifactGenerator
// (source-watcher) would: its spec names the generator, its status holds
// the artifact of one path of the repository.
func (e *kindsEnv) newExternalArtifact(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": sourcev1.GroupVersion.String(), "kind": sourcev1.ExternalArtifactKind,
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{"sourceRef": map[string]any{
			"apiVersion": "source.extensions.fluxcd.io/v1beta1", "kind": "ArtifactGenerator", "name": "monorepo",
		}},
	}}
	NewWithT(t).Expect(e.c.Create(context.Background(), obj)).To(Succeed())
	return obj
}

// generated is an artifact as an ArtifactGenerator publishes it: its
// revision is the digest of that path's content, not the commit.
func (e *kindsEnv) generated(files map[string]string) *meta.Artifact {
	a := e.artifacts.publish(files)
	a.Revision = "latest@" + a.Digest
	return a
}

// A monorepo split by an ArtifactGenerator into one ExternalArtifact per
// module (against the ExternalArtifact CRD of the pinned source-controller,
// v1.9.6): each Terraform object becomes Ready on its own artifact, and a
// commit that changes one module's path, so only that ExternalArtifact,
// re-plans and applies only the object on that path.
func TestSourceKindsExternalArtifact(t *testing.T) {
	e := startKindsEnv(t, fluxCRD("gitrepositories"), fluxCRD("externalartifacts"))
	ns := e.namespace(t)

	network := e.newExternalArtifact(t, ns, "network")
	dns := e.newExternalArtifact(t, ns, "dns")
	e.publish(t, network, e.generated(outputModule))
	e.publish(t, dns, e.generated(map[string]string{"mod/main.tf": `output "greeting" { value = "dns" }` + "\n"}))
	viaNetwork := e.terraformOn(t, ns, "network", sourcev1.ExternalArtifactKind, "network")
	viaDNS := e.terraformOn(t, ns, "dns", sourcev1.ExternalArtifactKind, "dns")
	e.waitReady(t, viaNetwork)
	e.waitReady(t, viaDNS)

	g := NewWithT(t)
	ctx := context.Background()
	before := &infrav1.Terraform{}
	g.Expect(e.c.Get(ctx, client.ObjectKeyFromObject(viaDNS), before)).To(Succeed())
	g.Expect(before.Status.LastAppliedRevision).To(HavePrefix("latest@sha256:"))

	// The commit changes the network module only: the generator publishes
	// a new artifact for network and leaves dns's as it was.
	changed := e.generated(map[string]string{"mod/main.tf": `output "greeting" { value = "hello again" }` + "\n"})
	e.publish(t, network, changed)
	e.waitFor(t, viaNetwork, func(g Gomega, obj *infrav1.Terraform) {
		g.Expect(obj.Status.LastAppliedRevision).To(Equal(changed.Revision))
		g.Expect(conditions.IsReady(obj)).To(BeTrue(), "Ready")
	})
	after := &infrav1.Terraform{}
	g.Expect(e.c.Get(ctx, client.ObjectKeyFromObject(viaDNS), after)).To(Succeed())
	g.Expect(after.Status.LastPlannedRevision).To(Equal(before.Status.LastPlannedRevision), "dns was planned again")
	g.Expect(after.Status.LastAppliedPlan).To(Equal(before.Status.LastAppliedPlan), "dns was applied again")
	g.Expect(after.Status.Plan).To(Equal(before.Status.Plan), "dns was planned again")
	g.Expect(conditions.IsReady(after)).To(BeTrue(), "Ready")
}
