package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWriteCLIConfig(t *testing.T) {
	path := t.TempDir() + "/cli.tfrc"
	if err := writeCLIConfig(path, []string{"/mirror/one", "/mirror/two"}); err != nil {
		t.Fatal(err)
	}
	got := readFile(t, path)
	want := `disable_checkpoint = true

provider_installation {
  filesystem_mirror {
    path = "/mirror/one"
  }
  filesystem_mirror {
    path = "/mirror/two"
  }
  direct {}
}
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if err := writeCLIConfig(path, []string{`/bad"path`}); err == nil {
		t.Fatal("a path that would break the HCL was accepted")
	}
}

// A provider a mirror holds is installed only from that mirror: the engine
// never asks its registry (which fails offline).
func TestWriteCLIConfigExcludesMirroredProviders(t *testing.T) {
	mirror := t.TempDir()
	for _, d := range []string{
		"registry.terraform.io/landform-dev/landform/0.1.0/linux_amd64",
		"registry.opentofu.org/landform-dev/landform/0.1.0/linux_amd64",
	} {
		if err := os.MkdirAll(filepath.Join(mirror, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := t.TempDir() + "/cli.tfrc"
	if err := writeCLIConfig(path, []string{mirror}); err != nil {
		t.Fatal(err)
	}
	list := `["registry.opentofu.org/landform-dev/landform", "registry.terraform.io/landform-dev/landform"]`
	want := `disable_checkpoint = true

provider_installation {
  filesystem_mirror {
    path = "` + mirror + `"
    include = ` + list + `
  }
  direct {
    exclude = ` + list + `
  }
}
`
	if diff := cmp.Diff(want, readFile(t, path)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}
