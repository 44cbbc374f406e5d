package cluster

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/testenv"
	"github.com/landform-dev/landform/internal/testenv/enginemirror"
)

// envEngineMirrorURL is the platform's engine release mirror
// (e2e/enginemirror on the node's address), which the chart installation
// configures as Terraform's releases URL, with its signing key.
const envEngineMirrorURL = "LANDFORM_CLUSTER_ENGINE_MIRROR_URL"

const engineModule = `
resource "terraform_data" "x" { input = "engine" }
output "x" { value = terraform_data.x.output }
`

// mirrorRequests is how many requests the platform's engine mirror
// answered for path.
func mirrorRequests(t *testing.T, path string) int {
	t.Helper()
	base := os.Getenv(envEngineMirrorURL)
	if base == "" {
		t.Fatalf("%s is not set: run the suite with `make e2e-cluster`, which starts the engine mirror (e2e/cluster/platform.sh)", envEngineMirrorURL)
	}
	resp, err := http.Get(base + enginemirror.CountsPath)
	if err != nil {
		t.Fatalf("asking the engine mirror for its requests: %v", err)
	}
	defer resp.Body.Close()
	var counts map[string]int
	if err := json.NewDecoder(resp.Body).Decode(&counts); err != nil {
		t.Fatalf("the engine mirror's request counts: %v", err)
	}
	return counts[path]
}

// A runner Pod runs the engine its object asks for, fetched from the
// installation's release mirror: the runner image holds only OpenTofu, the
// object pins Terraform 1.5.7, and the runner Pod downloads it from the
// mirror on the node's address and verifies it with the key the chart
// configured (engines.terraform.releasesURL and signingKey). The state is
// written by Terraform 1.5.7, the plan records the version, and the mirror
// served its archive.
func TestRunnerPodInstallsTerraformFromTheMirror(t *testing.T) {
	e := connect(t)
	ctx := context.Background()
	const name = "engine-terraform"
	e.deleteLeftovers(t, name, "tfstate-default-"+name)
	e.gitRepository(t, name, map[string]string{"m/main.tf": engineModule})
	archive := enginemirror.ArchivePath(enginemirror.Terraform, "1.5.7")
	before := mirrorRequests(t, archive)
	seen := e.watchRunnerPods(t, name)

	spec := autoSpec(name, "./m", 5*time.Second)
	spec.Engine = &infrav1.EngineSpec{Name: "terraform", Version: "~> 1.5.0"}
	tf := e.terraform(t, &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
	cur := e.waitForTerraform(t, tf, "Ready", readyTrue)

	want := &infrav1.EngineStatus{Name: "terraform", Version: "1.5.7"}
	if got := cur.Status.Plan; got == nil || got.Engine == nil || *got.Engine != *want {
		t.Errorf("the plan's engine %+v, want %+v", got, want)
	}
	var state corev1.Secret
	if err := e.client.Get(ctx, keyOf(e.ns, names.StateSecret(cur)), &state); err != nil {
		t.Fatal(err)
	}
	st, err := testenv.ReadState(state.Data)
	if err != nil {
		t.Fatal(err)
	}
	if st.TerraformVersion != "1.5.7" {
		t.Errorf("the state was written by version %q, want Terraform 1.5.7", st.TerraformVersion)
	}
	if n := mirrorRequests(t, archive) - before; n < 1 {
		t.Errorf("the mirror served Terraform 1.5.7's archive %d times during the test: the runner Pods did not install it from there", n)
	}
	pods := seen.pods()
	if len(pods) == 0 {
		t.Fatal("no runner Pod of the object was seen running")
	}
	for _, p := range pods {
		if img := p.Spec.Containers[0].Image; !strings.Contains(img, "landform-runner") {
			t.Errorf("runner Pod %s runs image %s, want the installation's runner image", p.Name, img)
		}
	}
	t.Logf("runner Pods %d, archive downloads %d", len(pods), mirrorRequests(t, archive)-before)
}
