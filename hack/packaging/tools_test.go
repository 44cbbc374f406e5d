package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// toolsScript is hack/tools.sh.
func toolsScript(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(path("hack", "tools.sh"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pin reads NAME_VERSION=... from hack/tools.sh.
func pin(t testing.TB, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `=(\S+)$`).FindStringSubmatch(toolsScript(t))
	if m == nil {
		t.Fatalf("hack/tools.sh pins no %s", name)
	}
	return m[1]
}

// TestToolPins: bin/helm and bin/kustomize are the versions hack/tools.sh
// pins, helm with the Kubernetes version of its release builds, and the
// script's default list installs them but not the optional kind.
func TestToolPins(t *testing.T) {
	henv := helmEnv(t)
	out, err := runErr(henv, helmBin(t), "version", "--template", "{{.Version}}")
	if err != nil {
		t.Fatal(err)
	}
	if want := pin(t, "HELM_VERSION"); strings.TrimSpace(out) != want {
		t.Errorf("helm reports version %q, want the pin %s", out, want)
	}
	// helm assumes this Kubernetes version for `helm template`; a build
	// without the release ldflags assumes v1.20 and refuses the chart.
	caps := decode(t, func() string {
		dir := t.TempDir()
		must(t, os.MkdirAll(filepath.Join(dir, "templates"), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: caps\nversion: 0.0.1\n"), 0o644))
		must(t, os.WriteFile(filepath.Join(dir, "templates", "cm.yaml"), []byte(
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: caps\ndata:\n  minor: {{ .Capabilities.KubeVersion.Minor | quote }}\n"), 0o644))
		out, err := runErr(henv, helmBin(t), "template", dir)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}())
	if minor := caps[0].Object["data"].(map[string]any)["minor"]; minor != pin(t, "HELM_KUBE_MINOR") {
		t.Errorf("helm assumes Kubernetes 1.%v, want 1.%s (HELM_KUBE_MINOR)", minor, pin(t, "HELM_KUBE_MINOR"))
	}

	if got, want := strings.TrimSpace(run(t, kustomizeBin(t), "version")), pin(t, "KUSTOMIZE_VERSION"); got != want {
		t.Errorf("kustomize reports version %q, want the pin %s", got, want)
	}

	m := regexp.MustCompile(`(?m)^tools=\(([^)]*)\)`).FindStringSubmatch(toolsScript(t))
	if m == nil {
		t.Fatal("hack/tools.sh has no default tools=(...) list")
	}
	list := " " + m[1] + " "
	for _, want := range []string{"helm", "kustomize", "monitoring_crds", "flux_crds"} {
		if !strings.Contains(list, " "+want+" ") {
			t.Errorf("hack/tools.sh does not install %s by default: %s", want, m[1])
		}
	}
	if strings.Contains(list, " kind ") {
		t.Errorf("kind is optional (it needs Docker) but hack/tools.sh installs it by default: %s", m[1])
	}

	// kind is optional: checked only where it was installed.
	if kind := path("bin", "kind"); fileExists(kind) {
		if out := run(t, kind, "version"); !strings.Contains(out, pin(t, "KIND_VERSION")+" ") {
			t.Errorf("bin/kind reports %q, want the pin %s", out, pin(t, "KIND_VERSION"))
		}
	}
}

// TestToolsScriptIsIdempotent: running hack/tools.sh again for tools in
// the cache builds nothing and leaves the links as they were.
func TestToolsScriptIsIdempotent(t *testing.T) {
	helm, kustomize := helmBin(t), kustomizeBin(t)
	if os.Getenv("LANDFORM_HELM") != "" && os.Getenv("LANDFORM_HELM") != path("bin", "helm") {
		t.Skip("LANDFORM_HELM points outside bin/: hack/tools.sh is not what installed it")
	}
	before := map[string]string{}
	for _, b := range []string{helm, kustomize} {
		before[b] = readlink(t, b)
	}
	_, stderr := runSplit(t, path("hack", "tools.sh"), "helm", "kustomize", "monitoring_crds")
	if strings.Contains(stderr, "building") || strings.Contains(stderr, "fetching") {
		t.Errorf("a second run of hack/tools.sh built or fetched again:\n%s", stderr)
	}
	for b, link := range before {
		if got := readlink(t, b); got != link {
			t.Errorf("%s now links to %s, was %s", b, got, link)
		}
	}
	// Cached by version: the link names the pinned version.
	if want := "helm-" + pin(t, "HELM_VERSION") + "/helm"; !strings.HasSuffix(before[helm], want) {
		t.Errorf("bin/helm links to %s, want the cache entry %s", before[helm], want)
	}
}

func readlink(t *testing.T, p string) string {
	t.Helper()
	l, err := os.Readlink(p)
	if err != nil {
		t.Fatalf("%s is not a link into the tool cache: %v", p, err)
	}
	return l
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// runSplit runs a command in the repository root and returns stdout and
// stderr apart.
func runSplit(t *testing.T, name string, args ...string) (string, string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = repoRoot()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, stderr.String())
	}
	return stdout.String(), stderr.String()
}
