package testenv

import (
	"path/filepath"
	"strings"
	"testing"
)

// One rule for a missing program: named by its variable or run by make,
// it fails; neither, it may skip. The message says what to run either way.
func TestToolMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "landform-controller")
	for _, tc := range []struct {
		name      string
		env, make string
		wantSkip  bool
		wantWhere string
	}{
		{name: "plain go test", wantSkip: true, wantWhere: filepath.Join(repoRoot(), "bin", "no-such-tool")},
		{name: "variable set", env: missing, wantWhere: missing},
		{name: "under make", make: "1", wantWhere: filepath.Join(repoRoot(), "bin", "no-such-tool")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("LANDFORM_TEST_NO_SUCH_TOOL", tc.env)
			t.Setenv("MAKELEVEL", tc.make)
			_, err := Tool("no-such-tool", "LANDFORM_TEST_NO_SUCH_TOOL")
			if err == nil {
				t.Fatal("found a missing tool")
			}
			if got := Skippable(err); got != tc.wantSkip {
				t.Errorf("Skippable = %v, want %v (%v)", got, tc.wantSkip, err)
			}
			for _, want := range []string{tc.wantWhere, "run `make tools build` or point LANDFORM_TEST_NO_SUCH_TOOL at it"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

// A directory of tools names every program missing from it.
func TestToolDirNamesWhatIsMissing(t *testing.T) {
	t.Setenv("MAKELEVEL", "")
	t.Setenv("LANDFORM_TEST_TOOLS_DIR", t.TempDir())
	_, err := ToolDir("LANDFORM_TEST_TOOLS_DIR", "etcd", "kube-apiserver")
	if err == nil || Skippable(err) || !strings.Contains(err.Error(), "etcd, kube-apiserver missing at ") ||
		!strings.Contains(err.Error(), "point LANDFORM_TEST_TOOLS_DIR at a directory holding them") {
		t.Fatalf("want a failure naming both, got %v", err)
	}
}

// Programs a flag names must exist, whatever the variables say.
func TestProgramsNamedMustExist(t *testing.T) {
	t.Setenv("MAKELEVEL", "")
	p := Programs{Controller: filepath.Join(t.TempDir(), "landform-controller")}
	err := p.Find()
	if err == nil || Skippable(err) || !strings.Contains(err.Error(), p.Controller) {
		t.Fatalf("want a failure naming %s, got %v", p.Controller, err)
	}
}
