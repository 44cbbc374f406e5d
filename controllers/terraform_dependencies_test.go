package controllers

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/inputs"
	"github.com/landform-dev/landform/internal/outcome"
)

// B dependsOn A: B waits, naming A, and runs once A is Ready.
func TestDependsOnWaitsForReady(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	newGitRepository(t, ns, "repo", artifacts.publish(fileModule()))
	pathA, pathB := effectPath(t, ".a"), effectPath(t, ".b")
	b := newTerraform(t, ns, "b", func(tf *infrav1.Terraform) {
		tf.Spec.Vars = fileVars(pathB, "b")
		tf.Spec.DependsOn = []infrav1.DependencyReference{{Name: "a"}}
	})
	obj := waitNotReady(t, b, infrav1.DependencyNotReadyReason)
	g.Expect(readyMessageOf(obj)).To(ContainSubstring("Terraform " + ns + "/a"))
	g.Consistently(func() string { return readFile(pathB) }).WithTimeout(2 * time.Second).Should(Equal("<missing>"))

	a := newTerraform(t, ns, "a", func(tf *infrav1.Terraform) {
		tf.Spec.Vars = fileVars(pathA, "a")
		tf.Spec.ApprovePlan = ""
	})
	obj = waitPending(t, a)
	g.Expect(readFile(pathB)).To(Equal("<missing>"), "B waits while A is not Ready")

	annotate(t, obj, infrav1.ApproveAnnotation, obj.Status.Plan.Pending)
	waitReady(t, a)
	waitReady(t, b)
	g.Expect(readFile(pathA)).To(Equal("a"))
	g.Expect(readFile(pathB)).To(Equal("b"))
}

// A shard's cache (--watch-label-selector) does not hold a dependency in
// another shard; dependsOn still sees it Ready, from the API server.
func TestDependsOnAcrossShards(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := newNamespace(t)
	newGitRepository(t, ns, "repo", artifacts.publish(fileModule()))
	a := newTerraform(t, ns, "a", func(tf *infrav1.Terraform) {
		tf.Labels = map[string]string{"sharding.fluxcd.io/key": "shard1"}
		tf.Spec.Vars = fileVars(effectPath(t, ".a"), "a")
	})
	waitReady(t, a)

	selector, err := labels.Parse("sharding.fluxcd.io/key in (shard2)")
	g.Expect(err).NotTo(HaveOccurred())
	shardCache, err := cache.New(restCfg, cache.Options{
		Scheme:   k8sClient.Scheme(),
		ByObject: map[client.Object]cache.ByObject{&infrav1.Terraform{}: {Label: selector}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = shardCache.Start(ctx) }()
	g.Expect(shardCache.WaitForCacheSync(ctx)).To(BeTrue())
	shardClient, err := client.New(restCfg, client.Options{Scheme: k8sClient.Scheme(), Cache: &client.CacheOptions{Reader: shardCache}})
	g.Expect(err).NotTo(HaveOccurred())
	err = shardClient.Get(ctx, client.ObjectKeyFromObject(a), &infrav1.Terraform{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the shard's cache does not hold a: %v", err)

	// The reconciler's resolver reads with its API reader, not the
	// shard's cache.
	r := &inputs.Resolver{Reader: k8sClient}
	b := &infrav1.Terraform{}
	b.Namespace, b.Name = ns, "b"
	b.Spec.DependsOn = []infrav1.DependencyReference{{Name: "a"}}
	g.Expect(r.Dependencies(ctx, b)).To(Succeed(), "a is Ready in the other shard")

	b.Spec.DependsOn = append(b.Spec.DependsOn, infrav1.DependencyReference{Name: "missing"})
	err = r.Dependencies(ctx, b)
	g.Expect(outcome.Of(err, "").Kind).To(Equal(outcome.Waiting), "waits: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("Terraform " + ns + "/missing (not found)"))
	g.Expect(err.Error()).NotTo(ContainSubstring(ns + "/a "))
}
