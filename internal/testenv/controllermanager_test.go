package testenv

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// A missing kube-controller-manager fails the start and says what to run:
// never a skip, so a test that needs the garbage collector cannot pass
// without one.
func TestStartGarbageCollectorWithoutBinary(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "kube-controller-manager")
	t.Setenv("LANDFORM_KUBE_CONTROLLER_MANAGER", missing)
	m, err := StartGarbageCollector(context.Background(), nil, filepath.Join(t.TempDir(), "kubeconfig"), t.TempDir())
	if err == nil {
		_ = m.Stop()
		t.Fatal("started without a binary")
	}
	for _, want := range []string{missing, "run `make tools`"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
