package packaging

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// TestE2EKindSkipsWithoutDocker: where `docker info` fails (as on the
// project's machines), `make e2e-kind` says so and succeeds, before
// touching anything.
func TestE2EKindSkipsWithoutDocker(t *testing.T) {
	fake := t.TempDir()
	must(t, os.WriteFile(filepath.Join(fake, "docker"), []byte("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n"), 0o755))
	out, err := runErr([]string{"PATH=" + fake + ":" + os.Getenv("PATH")}, path("e2e", "kind", "run.sh"))
	if err != nil {
		t.Fatalf("e2e/kind/run.sh without Docker: %v", err)
	}
	if strings.TrimSpace(out) != "e2e-kind skipped: no Docker engine (docker info failed)" {
		t.Errorf("output %q, want the one skip line", out)
	}
}

// TestE2EKindInstallation renders what e2e/kind/run.sh installs, the same
// way, and applies it with server-side dry run: source-controller from its
// Go module's config/default, and the chart with e2e/kind/values.yaml. It
// also checks that the images those values name are the ones run.sh builds.
func TestE2EKindInstallation(t *testing.T) {
	script, err := os.ReadFile(path("e2e", "kind", "run.sh"))
	if err != nil {
		t.Fatal(err)
	}
	version := pin(t, "FLUX_SOURCE_VERSION")
	if !strings.Contains(string(script), "FLUX_SOURCE_VERSION") {
		t.Error("e2e/kind/run.sh does not install the source-controller version hack/tools.sh pins")
	}
	out, err := runErr(nil, "go", "mod", "download", "-json", "github.com/fluxcd/source-controller@"+version)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`"Dir": "([^"]+)"`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("go mod download printed no Dir:\n%s", out)
	}
	flux := kustomizeBuild(t, filepath.Join(m[1], "config", "default"))
	find(t, flux, "Deployment", "source-system", "source-controller")
	dryRunApply(t, flux)

	objs := helmTemplate(t, "--values", "e2e/kind/values.yaml", "--set", "runner.namespaces={e2e}")
	ensureNamespace(t, releaseNamespace, nil)
	ensureNamespace(t, "e2e", nil)
	dryRunApply(t, objs)
	find(t, objs, "ServiceAccount", "e2e", "landform-runner")
	dep := into[appsv1.Deployment](t, find(t, objs, "Deployment", releaseNamespace, "landform-controller"))
	images := []string{dep.Spec.Template.Spec.Containers[0].Image}
	for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
		if img, ok := strings.CutPrefix(a, "--runner-image="); ok {
			images = append(images, img)
		}
	}
	for _, img := range images {
		if !strings.Contains(string(script), img) {
			t.Errorf("e2e/kind/values.yaml installs image %s, which e2e/kind/run.sh does not build", img)
		}
	}
	for _, target := range []string{"controller", "runner-e2e", "e2e-gitserver"} {
		if !strings.Contains(string(script), "--target "+target) {
			t.Errorf("e2e/kind/run.sh does not build the Dockerfile target %s", target)
		}
	}
}
