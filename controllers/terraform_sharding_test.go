package controllers

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

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

	r := &TerraformReconciler{Client: shardClient, APIReader: k8sClient}
	b := &infrav1.Terraform{}
	b.Namespace, b.Name = ns, "b"
	b.Spec.DependsOn = []infrav1.DependencyReference{{Name: "a"}}
	g.Expect(r.checkDependencies(ctx, b)).To(Succeed(), "a is Ready in the other shard")

	b.Spec.DependsOn = append(b.Spec.DependsOn, infrav1.DependencyReference{Name: "missing"})
	err = r.checkDependencies(ctx, b)
	g.Expect(outcomeOf(err, "").kind).To(Equal(waitingFor), "waits: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("Terraform " + ns + "/missing (not found)"))
	g.Expect(err.Error()).NotTo(ContainSubstring(ns + "/a "))
}
