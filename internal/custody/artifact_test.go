package custody

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/source"
)

// moduleTarball is a source artifact holding main.tf, and its digest.
func moduleTarball(t *testing.T, body string) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: "main.tf", Mode: 0o644, Size: int64(len(body))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), fmt.Sprintf("sha256:%x", sha256.Sum256(buf.Bytes()))
}

// keptSecrets counts the Secrets an artifact is kept in.
func keptSecrets(t *testing.T, c client.Client) int {
	t.Helper()
	var l corev1.SecretList
	if err := c.List(context.Background(), &l); err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

// appliedArtifact is a keeper of object db whose artifact cache holds
// the artifact an apply of db applied (as a Fetch left it): its bytes
// and digest.
func appliedArtifact(t *testing.T) (*Keeper, client.Client, *v1alpha1.Terraform, []byte, string) {
	t.Helper()
	db := object("db", "uid-db", 0, "")
	k, c := keeper(t, db)
	data, d := moduleTarball(t, `resource "terraform_data" "x" {}`)
	k.Artifacts = source.NewFetcher(t.TempDir())
	if _, _, err := k.Artifacts.Restore(context.Background(), d, data); err != nil {
		t.Fatal(err)
	}
	return k, c, db, data, d
}

// The artifact an apply applied is kept beside the state; a controller
// whose cache is gone (another Pod) destroys from it, the module intact.
func TestAnAppliedArtifactOutlivesTheCache(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	k, c, db, data, d := appliedArtifact(t)

	g.Expect(k.KeepArtifact(ctx, db, "main@sha1:abc", d, nil)).To(BeEmpty())
	g.Expect(db.Status.LastAppliedArtifact).To(Equal(&v1alpha1.AppliedArtifactStatus{
		Revision: "main@sha1:abc", Digest: d, Size: int64(len(data)), Kept: true}))
	g.Expect(KeptDigest(db)).To(Equal(d))
	g.Expect(keptSecrets(t, c)).To(BeNumerically(">", 0))

	k.Artifacts = source.NewFetcher(t.TempDir())
	_, dir, err := k.KeptArtifact(ctx, db)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.ReadFile(filepath.Join(dir, "main.tf"))).To(BeEquivalentTo(`resource "terraform_data" "x" {}`))

	g.Expect(k.DeleteArtifact(ctx, db)).To(Succeed())
	g.Expect(keptSecrets(t, c)).To(BeZero())
	k.Artifacts = source.NewFetcher(t.TempDir())
	_, _, err = k.KeptArtifact(ctx, db)
	var unusable *ArtifactUnusableError
	g.Expect(errors.As(err, &unusable)).To(BeTrue(), "%v", err)
	g.Expect(unusable.Why).To(ContainSubstring("cannot be used"))
}

// An artifact over the limit is not kept, with a message that says what
// that means; the destroy without a source then says why it cannot run.
func TestAnArtifactOverTheLimitIsNotKept(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	k, c, db, _, d := appliedArtifact(t)
	k.ArtifactMaxSize = 10

	g.Expect(k.KeepArtifact(ctx, db, "main@sha1:abc", d, nil)).To(ContainSubstring("larger than --kept-artifact-max-size"))
	g.Expect(db.Status.LastAppliedArtifact.Kept).To(BeFalse())
	g.Expect(keptSecrets(t, c)).To(BeZero())
	_, _, err := k.KeptArtifact(ctx, db)
	var unusable *ArtifactUnusableError
	g.Expect(errors.As(err, &unusable)).To(BeTrue(), "%v", err)
	g.Expect(unusable.Why).To(ContainSubstring("too large to keep"))

	none := object("fresh", "uid-fresh", 0, "")
	_, _, err = k.KeptArtifact(ctx, none)
	g.Expect(errors.As(err, &unusable)).To(BeTrue())
	g.Expect(unusable.Why).To(ContainSubstring("no applied artifact was kept"))
}
