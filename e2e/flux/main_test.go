package flux

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/landform-dev/landform/internal/cloud"
	"github.com/landform-dev/landform/internal/devenv"
	"github.com/landform-dev/landform/internal/testenv"
)

// The environment every scenario shares.
var (
	env      *devenv.Env
	cloudAPI *cloud.Client
	repoRoot string
	// unavailable is why the suite skips here (testenv.Skippable); nil
	// when it runs.
	unavailable error
)

// TestMain starts one embedded environment for the whole suite. Missing
// tools fail the suite under make (skipping would let `make test` pass
// without it) and have every scenario skip under a plain `go test`
// (testenv.ToolDir).
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// The controller logs to the environment's log files; this is the
	// suite's own clients.
	ctrllog.SetLogger(logr.Discard())
	_, file, _, _ := runtime.Caller(0)
	repoRoot = filepath.Join(filepath.Dir(file), "..", "..")
	tools, err := testenv.ToolDir(devenv.ToolsDirEnv, "kube-apiserver", "etcd", "source-controller", "kustomize-controller",
		"notification-controller", "flux-crds", "flux-kustomize-crds", "flux-notification-crds", "tofu", "landform-runner")
	if testenv.Skippable(err) {
		unavailable = err
		return m.Run()
	} else if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	state, err := os.MkdirTemp("", "landform-e2e-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env, err = devenv.Start(ctx, devenv.Options{StateDir: state, RepoDir: repoRoot, ToolsDir: tools, Progress: &progress})
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: starting the embedded environment: %v (run `make tools build` first)\n%s\nstate and logs kept in %s\n",
			err, progress.String(), state)
		return 1
	}
	cloudAPI = &cloud.Client{URL: env.CloudURL}

	code := m.Run()
	select {
	case err := <-env.Failed():
		fmt.Fprintf(os.Stderr, "e2e: a component of the environment stopped during the suite: %v\n", err)
		code = 1
	default:
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: stopping the environment: %v\n", err)
		code = 1
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "e2e: state and logs of every component kept in %s\n", filepath.Join(state, "logs"))
		return code
	}
	_ = os.RemoveAll(state)
	return 0
}
