package source

import (
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestArtifactChangedPassesOnlyANewArtifact(t *testing.T) {
	repo := func(revision, digest string, ready metav1.ConditionStatus) *sourcev1.GitRepository {
		r := &sourcev1.GitRepository{}
		if revision != "" {
			r.Status.Artifact = &meta.Artifact{Revision: revision, Digest: digest, URL: "http://source-controller/a.tar.gz"}
		}
		r.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: ready}}
		return r
	}
	moved := func(r *sourcev1.GitRepository) *sourcev1.GitRepository {
		r.Status.Artifact.URL = "http://source-controller.other/a.tar.gz"
		return r
	}
	metadata := &metav1.PartialObjectMetadata{}
	for _, tt := range []struct {
		name        string
		old, new    client.Object
		wantPassing bool
	}{
		{"conditions only", repo("main@sha1:a", "sha256:1", metav1.ConditionTrue), repo("main@sha1:a", "sha256:1", metav1.ConditionFalse), false},
		{"new revision", repo("main@sha1:a", "sha256:1", metav1.ConditionTrue), repo("main@sha1:b", "sha256:2", metav1.ConditionTrue), true},
		{"same revision, new digest", repo("main@sha1:a", "sha256:1", metav1.ConditionTrue), repo("main@sha1:a", "sha256:2", metav1.ConditionTrue), true},
		{"same artifact, new address", repo("main@sha1:a", "sha256:1", metav1.ConditionTrue), moved(repo("main@sha1:a", "sha256:1", metav1.ConditionTrue)), true},
		{"first artifact", repo("", "", metav1.ConditionFalse), repo("main@sha1:a", "sha256:1", metav1.ConditionTrue), true},
		{"artifact gone", repo("main@sha1:a", "sha256:1", metav1.ConditionTrue), repo("", "", metav1.ConditionFalse), true},
		{"still none (the waiting message follows the source's)", repo("", "", metav1.ConditionFalse), repo("", "", metav1.ConditionUnknown), true},
		{"metadata only (v1beta2)", metadata, metadata.DeepCopy(), true},
	} {
		if got := ArtifactChanged.Update(event.UpdateEvent{ObjectOld: tt.old, ObjectNew: tt.new}); got != tt.wantPassing {
			t.Errorf("%s: passes %v, want %v", tt.name, got, tt.wantPassing)
		}
	}
	if !ArtifactChanged.Create(event.CreateEvent{Object: repo("", "", metav1.ConditionUnknown)}) || !ArtifactChanged.Delete(event.DeleteEvent{Object: repo("", "", metav1.ConditionUnknown)}) {
		t.Error("a source's creation and deletion must pass")
	}
}
