package cli

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/landform-dev/landform/api/v1alpha1"
)

// --with-source on an ExternalArtifact fails at once, naming what writes
// it, instead of asking source-controller, which never answers for one.
func TestWithSourceRefusesExternalArtifact(t *testing.T) {
	obj := &v1alpha1.Terraform{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "network"},
		Spec:       v1alpha1.TerraformSpec{SourceRef: v1alpha1.SourceReference{Kind: "ExternalArtifact", Name: "network"}},
	}
	// No session: the refusal comes before anything is read.
	_, err := (&app{}).reconcileSource(context.Background(), nil, obj, io.Discard, time.Now().Add(time.Minute), time.Minute)
	if err == nil || !strings.Contains(err.Error(), "ExternalArtifact infra/network is written by the ArtifactGenerator") {
		t.Fatalf("err %v, want the refusal naming the ArtifactGenerator", err)
	}
}
