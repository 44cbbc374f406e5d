package source

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// The fake client only stands in for reading status here; behaviour the API
// server owns is covered by the controller's envtest suites.
func TestGetArtifact(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := sourcev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	art := func(rev string) *meta.Artifact {
		return &meta.Artifact{
			Revision: rev, Digest: "sha256:0123", Path: "x.tar.gz",
			URL: "http://source-controller.flux-system.svc/" + rev + ".tar.gz",
		}
	}
	om := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: "flux-system", Name: name} }
	objs := []client.Object{
		&sourcev1.GitRepository{ObjectMeta: om("git"), Status: sourcev1.GitRepositoryStatus{Artifact: art("main@sha1:abc")}},
		&sourcev1.OCIRepository{ObjectMeta: om("oci"), Status: sourcev1.OCIRepositoryStatus{Artifact: art("v1@sha256:def")}},
		&sourcev1.Bucket{ObjectMeta: om("bucket"), Status: sourcev1.BucketStatus{Artifact: art("sha256:789")}},
		&sourcev1.GitRepository{ObjectMeta: om("pending"), Status: sourcev1.GitRepositoryStatus{
			Conditions: []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionFalse,
				Reason: "GitOperationFailed", Message: "failed to checkout: authentication required"}},
		}},
		&sourcev1.Bucket{ObjectMeta: om("new")},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()

	tests := []struct {
		kind, name string
		want       *Artifact
		wantErr    error
		wantMsg    []string
	}{
		{kind: "GitRepository", name: "git", want: &Artifact{Kind: "GitRepository", Namespace: "flux-system", Name: "git",
			Revision: "main@sha1:abc", Digest: "sha256:0123", URL: "http://source-controller.flux-system.svc/main@sha1:abc.tar.gz"}},
		{kind: "OCIRepository", name: "oci", want: &Artifact{Kind: "OCIRepository", Namespace: "flux-system", Name: "oci",
			Revision: "v1@sha256:def", Digest: "sha256:0123", URL: "http://source-controller.flux-system.svc/v1@sha256:def.tar.gz"}},
		{kind: "Bucket", name: "bucket", want: &Artifact{Kind: "Bucket", Namespace: "flux-system", Name: "bucket",
			Revision: "sha256:789", Digest: "sha256:0123", URL: "http://source-controller.flux-system.svc/sha256:789.tar.gz"}},
		{kind: "GitRepository", name: "absent", wantErr: ErrSourceNotFound,
			wantMsg: []string{"GitRepository flux-system/absent", "spec.sourceRef"}},
		// Same name, other kind: the kind matters.
		{kind: "OCIRepository", name: "git", wantErr: ErrSourceNotFound, wantMsg: []string{"OCIRepository flux-system/git"}},
		{kind: "GitRepository", name: "pending", wantErr: ErrSourceNotReady,
			wantMsg: []string{"GitRepository flux-system/pending", "no artifact", "authentication required"}},
		{kind: "Bucket", name: "new", wantErr: ErrSourceNotReady, wantMsg: []string{"Bucket flux-system/new", "no artifact"}},
		{kind: "HelmChart", name: "git", wantMsg: []string{`unsupported source kind "HelmChart"`}},
	}
	for _, tt := range tests {
		t.Run(tt.kind+"/"+tt.name, func(t *testing.T) {
			got, err := GetArtifact(context.Background(), c, nil, tt.kind, "flux-system", tt.name)
			if tt.want != nil {
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(tt.want, got); d != "" {
					t.Errorf("artifact (-want +got):\n%s", d)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %+v, want an error", got)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("got %v, want %v", err, tt.wantErr)
			}
			for _, m := range tt.wantMsg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not contain %q", err, m)
				}
			}
		})
	}
}
