package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// Suite is what the suites that run Landform's own binaries as processes
// (e2e/durable, e2e/sharding) share: the binaries, an API server, a
// kubeconfig file for the processes, and an artifact server standing in
// for source-controller.
type Suite struct {
	// Name says which suite in messages ("the durability tests").
	Name string

	// Programs are found by Programs.Find.
	Programs
	Env *Env
	// Kubeconfig reaches Env, for the processes.
	Kubeconfig string
	Artifacts  *Artifacts

	// unavailable is why the suite skips here (Skippable); nil when it
	// runs.
	unavailable error
}

// Main is the suite's TestMain: it finds the binaries, starts the API
// server and the artifact server, runs the tests and stops everything. A
// missing binary or API server fails the suite under make and has every
// test skip under a plain `go test` (Tool); anything else fails it.
func (s *Suite) Main(m *testing.M) int {
	err := s.start()
	defer s.stop()
	switch {
	case err == nil:
	case Skippable(err):
		s.unavailable = err
	default:
		fmt.Fprintf(os.Stderr, "FAIL: %s: %v\n", s.Name, err)
		return 1
	}
	return m.Run()
}

func (s *Suite) start() error {
	if err := s.Programs.Find(); err != nil {
		return err
	}
	var err error
	if s.Env, err = Start(); err != nil {
		return fmt.Errorf("cannot start the test API server: %w", err)
	}
	dir, err := os.MkdirTemp("", "landform-suite-")
	if err != nil {
		return err
	}
	s.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(s.Kubeconfig, s.Env.env.KubeConfig, 0o600); err != nil {
		return err
	}
	s.Artifacts, err = StartArtifacts(filepath.Join(dir, "artifacts"))
	return err
}

func (s *Suite) stop() {
	if s.Artifacts != nil {
		s.Artifacts.Close()
	}
	if s.Env != nil {
		_ = s.Env.Stop()
	}
	if s.Kubeconfig != "" {
		_ = os.RemoveAll(filepath.Dir(s.Kubeconfig))
	}
}

// Require skips t when the suite cannot run here.
func (s *Suite) Require(t testing.TB) {
	t.Helper()
	if s.unavailable != nil {
		t.Skip(s.unavailable)
	}
}

// Namespace is a fresh namespace for one test (Env.Namespace), after
// Require.
func (s *Suite) Namespace(t testing.TB) string {
	t.Helper()
	s.Require(t)
	return s.Env.Namespace(t)
}

// Publish serves files as a tarball artifact and points a GitRepository
// "repo" in ns at it, as source-controller would (Artifacts.Publish).
func (s *Suite) Publish(t testing.TB, ns string, files map[string]string) {
	t.Helper()
	if _, err := s.Artifacts.Publish(context.Background(), s.Env.Client, ns, files); err != nil {
		t.Fatalf("publishing the artifact of %s: %v", ns, err)
	}
}

// Terraform is an auto-approved object, not yet created, on the module
// Publish serves in ns (from the root of the artifact): checked hourly,
// retried every retry, given vars, and writing its outputs to Secret
// <name>-outputs.
func (s *Suite) Terraform(ns, name string, retry time.Duration, vars ...v1alpha1.Variable) *v1alpha1.Terraform {
	return &v1alpha1.Terraform{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.TerraformSpec{
			SourceRef:            v1alpha1.SourceReference{Kind: sourcev1.GitRepositoryKind, Name: "repo"},
			Path:                 "./",
			Interval:             metav1.Duration{Duration: time.Hour},
			RetryInterval:        &metav1.Duration{Duration: retry},
			ApprovePlan:          v1alpha1.ApprovePlanAuto,
			Vars:                 vars,
			WriteOutputsToSecret: &v1alpha1.WriteOutputsToSecretSpec{Name: name + "-outputs"},
		},
	}
}

// StartController starts landform-controller for one test
// (StartController) with the suite's binaries and kubeconfig, and local
// runners unless o says otherwise.
func (s *Suite) StartController(t testing.TB, o ControllerOptions) *Controller {
	t.Helper()
	s.Require(t)
	if o.Binary == "" {
		o.Binary = s.Controller
	}
	if o.Kubeconfig == "" {
		o.Kubeconfig = s.Kubeconfig
	}
	if o.Engine == "" {
		o.Engine = s.Tofu
	}
	if o.Runner == "" {
		o.Runner = "local"
	}
	if o.Runner == "local" && o.RunnerBinary == "" {
		o.RunnerBinary = s.Runner
	}
	return StartController(t, o)
}
