// Package sharding proves Flux-style sharding: several real
// landform-controller processes, each started with its own
// --watch-label-selector and --leader-elect against one real API server
// (envtest), split the Terraform objects between them. Every object is
// reconciled, by exactly one controller, and a dependsOn across shards
// still works.
//
// The binaries are LANDFORM_CONTROLLER_BIN, LANDFORM_RUNNER_BIN and
// LANDFORM_TOFU, else bin/landform-controller, bin/landform-runner and
// bin/tofu (`make tools build`); the API server is KUBEBUILDER_ASSETS or
// bin/. A missing one fails the suite under make and skips it under a
// plain `go test`, saying what to run (testenv.Tool).
// LANDFORM_TEST_LOGS=1 streams the controllers' output; otherwise a failed
// test prints it.
package sharding

import (
	"os"
	"testing"

	"github.com/landform-dev/landform/internal/testenv"
)

// suite is the binaries, the API server and the artifact server.
var suite = &testenv.Suite{Name: "the sharding test"}

func TestMain(m *testing.M) { os.Exit(suite.Main(m)) }
