// Package durable proves that runs survive the controller and their
// runners: the real landform-controller binary is stopped or killed
// mid-apply, or the runner Pod is, against a real API server (envtest),
// with real runner processes and a real OpenTofu, and the tests check what a
// user would check afterwards: how many times a create ran, the outputs
// Secret, the conditions, the state lock, the state's serial.
//
// The binaries are built from this repository unless LANDFORM_CONTROLLER_BIN
// and LANDFORM_RUNNER_BIN name them; OpenTofu is LANDFORM_TOFU or bin/tofu,
// the API server KUBEBUILDER_ASSETS or bin/ (`make tools`). Without them the
// suite fails, saying so, as every envtest suite here does.
// LANDFORM_TEST_LOGS=1 streams the controllers', runners' and fake
// kubelet's output; otherwise a failed test prints it.
package durable

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/testenv"
)

var (
	env        *testenv.Env
	kube       *kubernetes.Clientset
	kubeconfig string // reaches env, for controller processes
	root       string // of the repository
	bins       struct{ controller, runner, tofu string }
	artifacts  *testenv.Artifacts
	verbose    = os.Getenv("LANDFORM_TEST_LOGS") != ""
)

func TestMain(m *testing.M) { os.Exit(runSuite(m)) }

func runSuite(m *testing.M) int {
	root, _ = filepath.Abs(filepath.Join("..", ".."))
	tmp, err := os.MkdirTemp("", "landform-durable-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(tmp)
	bins.tofu = testenv.EnvOr("LANDFORM_TOFU", filepath.Join(root, "bin", "tofu"))
	if _, err := os.Stat(bins.tofu); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: the durability tests need OpenTofu at %s: run `make tools` or set LANDFORM_TOFU (%v)\n", bins.tofu, err)
		return 1
	}
	for _, b := range []struct {
		path *string
		env  string
		pkg  string
	}{{&bins.controller, "LANDFORM_CONTROLLER_BIN", "cmd/controller"}, {&bins.runner, "LANDFORM_RUNNER_BIN", "cmd/runner"}} {
		if *b.path = os.Getenv(b.env); *b.path != "" {
			continue
		}
		*b.path = filepath.Join(tmp, filepath.Base(b.pkg))
		build := exec.Command("go", "build", "-o", *b.path, "./"+b.pkg)
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: building %s (or set %s): %v\n%s", b.pkg, b.env, err, out)
			return 1
		}
	}
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: cannot start the test API server:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	if kube, err = kubernetes.NewForConfig(env.Config); err != nil {
		panic(err)
	}
	kubeconfig = filepath.Join(tmp, "kubeconfig")
	if err := placement.WriteKubeconfig(env.Config, kubeconfig); err != nil {
		panic(err)
	}
	if artifacts, err = testenv.StartArtifacts(filepath.Join(tmp, "artifacts")); err != nil {
		panic(err)
	}
	defer artifacts.Close()
	return m.Run()
}
