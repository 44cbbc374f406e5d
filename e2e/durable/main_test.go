// Package durable proves that runs survive the controller and their
// runners: the real landform-controller binary is stopped or killed
// mid-apply, or the runner Pod is, against a real API server (envtest),
// with real runner processes and a real OpenTofu, and the tests check what a
// user would check afterwards: how many times a create ran, the outputs
// Secret, the conditions, the state lock, the state's serial.
//
// The binaries are LANDFORM_CONTROLLER_BIN, LANDFORM_RUNNER_BIN and
// LANDFORM_TOFU, else bin/landform-controller, bin/landform-runner and
// bin/tofu (`make tools build`); the API server is KUBEBUILDER_ASSETS or
// bin/. A missing one fails the suite under make and skips it under a
// plain `go test`, saying what to run (testenv.Tool).
// LANDFORM_TEST_LOGS=1 streams the controllers', runners' and fake
// kubelet's output; otherwise a failed test prints it.
package durable

import (
	"os"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/landform-dev/landform/internal/testenv"
)

// suite is the binaries, the API server and the artifact server.
var suite = &testenv.Suite{Name: "the durability tests"}

func TestMain(m *testing.M) { os.Exit(suite.Main(m)) }

// kube is a clientset of the API server (the suite's, or a test's own), for
// what the controller-runtime client lacks (typed Leases for statelock).
func kube() *kubernetes.Clientset { return kubernetes.NewForConfigOrDie(suite.Env.Config) }
