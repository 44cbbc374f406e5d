// Package devenv is `landform dev`: a complete local environment — etcd,
// kube-apiserver and kube-controller-manager's garbage collector, the Landform and Flux CRDs, the real Flux source-,
// kustomize- and notification-controller, a git server seeded with this repository's
// modules/, the stand-in cloud, a webhook receiving Flux alerts and the
// Landform controller with local runners, sending its events to
// notification-controller — started from Go by Start and stopped, in reverse order, by
// Stop. Its state lives in one directory, so a restart keeps the objects,
// the git repositories and the cloud's contents.
//
// Layout of the state directory:
//
//	lock               the PID of the `landform dev` using it
//	ports.json         the ports of the API server, git server, cloud and artifact storage (stable across restarts)
//	env.json           URLs of the running environment (read by `landform dev cloud ls`)
//	kubeconfig         admin access to the API server
//	samples.yaml       config/samples adapted to the dev git server
//	alerts.yaml        a Flux Provider and Alert on Terraform objects, delivering to logs/alerts.log
//	terraform.rc       a CLI config using the provider mirror, for running tofu by hand
//	etcd/              etcd's data
//	git/               bare repositories (landform.git)
//	cloud.json         the stand-in cloud's objects
//	providers/         the provider filesystem mirror runners read
//	source-controller/ source-controller's artifact storage
//	controller/        the Landform controller's artifact cache and runner directories
//	logs/              one log per component (the previous run's as *.log.1); alerts.log: the notifications received
package devenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options configure Start.
type Options struct {
	// StateDir holds everything the environment keeps (see the package
	// documentation). Required.
	StateDir string
	// RepoDir is the Landform checkout: its modules/ seed the git server,
	// config/crd/bases are installed, hack/build-provider.sh builds the
	// provider mirror and cmd/runner the runner. Required.
	RepoDir string
	// ToolsDir holds kube-apiserver, etcd, source-controller,
	// kustomize-controller, notification-controller, tofu and the Flux CRDs
	// (flux-crds, flux-kustomize-crds, flux-notification-crds), as `make
	// tools` installs them. Default
	// RepoDir/bin.
	ToolsDir string
	// APIServerPort, GitPort and CloudPort choose the loopback ports of the
	// API server, the git server and the stand-in cloud. Zero: the port the
	// state directory recorded on a previous start, else a free one.
	APIServerPort, GitPort, CloudPort int
	// RunnerBinary is the landform-runner executable. Default
	// ToolsDir/landform-runner when it exists, else ./cmd/runner built into
	// the state directory on the first start.
	RunnerBinary string
	// Engine is the terraform or tofu binary runners use. Default
	// ToolsDir/tofu.
	Engine string
	// Progress receives one line per step, with its timing. Nil discards.
	Progress io.Writer
}

// Env is a running environment.
type Env struct {
	// StateDir is Options.StateDir, absolute.
	StateDir string
	// Kubeconfig is the path of the admin kubeconfig (StateDir/kubeconfig).
	Kubeconfig string
	// APIServerURL is the API server's https URL.
	APIServerURL string
	// GitURL is the URL of the repository seeded with modules/ (push
	// enabled, branch main); GitBaseURL serves every repository under
	// StateDir/git.
	GitURL, GitBaseURL string
	// CloudURL is the stand-in cloud's endpoint (LANDFORM_CLOUD_ENDPOINT of
	// the runners).
	CloudURL string
	// Samples is a file of config/samples adapted to the dev git server.
	Samples string
	// EventsURL is notification-controller's event endpoint, where the
	// Landform controller sends its events (its --events-addr).
	EventsURL string
	// AlertReceiverURL is a webhook that appends what it receives to
	// logs/alerts.log; Alerts is a file of a generic Provider posting to it
	// and an Alert on the Terraform objects of namespace default.
	AlertReceiverURL, Alerts string
	// UIURL is the web view `landform dev` serves (with its token); empty
	// when none is served.
	UIURL string
	// Config and Client reach the API server as its admin.
	Config *rest.Config
	Client client.Client

	progress io.Writer
	lock     *lockFile

	mu       sync.Mutex
	stops    []stopFunc
	stopping bool
	stopErr  error
	stopped  bool
	failed   chan error
}

type stopFunc struct {
	name string
	fn   func() error
}

// Start starts every component, in order, and returns when all of them
// are ready. ctx bounds the start only; the environment runs until Stop.
// On failure, whatever was started is stopped again.
func Start(ctx context.Context, o Options) (_ *Env, retErr error) {
	if o.StateDir == "" || o.RepoDir == "" {
		return nil, errors.New("devenv: StateDir and RepoDir are required")
	}
	state, err := filepath.Abs(o.StateDir)
	if err != nil {
		return nil, err
	}
	o.StateDir = state
	if o.RepoDir, err = filepath.Abs(o.RepoDir); err != nil {
		return nil, err
	}
	if o.ToolsDir == "" {
		o.ToolsDir = filepath.Join(o.RepoDir, "bin")
	}
	if o.ToolsDir, err = filepath.Abs(o.ToolsDir); err != nil {
		return nil, err
	}
	if o.Engine == "" {
		o.Engine = filepath.Join(o.ToolsDir, "tofu")
	}
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	e := &Env{
		StateDir:   state,
		Kubeconfig: filepath.Join(state, "kubeconfig"),
		Samples:    filepath.Join(state, "samples.yaml"),
		Alerts:     filepath.Join(state, "alerts.yaml"),
		progress:   progress,
		failed:     make(chan error, 1),
	}
	if err := os.MkdirAll(filepath.Join(state, "logs"), 0o700); err != nil {
		return nil, fmt.Errorf("creating the state dir: %w", err)
	}
	if e.lock, err = acquireLock(filepath.Join(state, "lock")); err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			_ = e.Stop()
		}
	}()
	s := &starter{Env: e, o: o, ctx: ctx}
	for _, st := range []struct {
		name string
		run  func() (string, error)
	}{
		{"checking tools", s.checkTools},
		{"reserving ports", s.reservePorts},
		{"etcd and kube-apiserver", s.startControlPlane},
		{"garbage collector", s.startGarbageCollector},
		{"git server", s.startGitServer},
		{"stand-in cloud", s.startCloud},
		{"provider mirror", s.buildProviders},
		{"runner binary", s.findRunner},
		{"source-controller", s.startSourceController},
		{"kustomize-controller", s.startKustomizeController},
		{"notification-controller", s.startNotificationController},
		{"alert receiver", s.startAlertReceiver},
		{"landform controller", s.startController},
		{"samples and env.json", s.writeFiles},
	} {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("interrupted before %s: %w", st.name, err)
		}
		if err := e.step(st.name, st.run); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// step runs one start or stop step and reports it on one line.
func (e *Env) step(name string, run func() (string, error)) error {
	start := time.Now()
	fmt.Fprintf(e.progress, "  %-34s ", name)
	detail, err := run()
	took := time.Since(start).Round(100 * time.Millisecond)
	if err != nil {
		fmt.Fprintf(e.progress, "failed (%s)\n", took)
		return fmt.Errorf("%s: %w", name, err)
	}
	if detail == "" {
		detail = "done"
	}
	fmt.Fprintf(e.progress, "%s (%s)\n", detail, took)
	return nil
}

// onStop registers what stops a started component; Stop runs them in
// reverse order.
func (e *Env) onStop(name string, fn func() error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stops = append(e.stops, stopFunc{name, fn})
}

// fail reports a component that ended on its own while the environment
// was running.
func (e *Env) fail(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopping {
		return
	}
	select {
	case e.failed <- err:
	default:
	}
}

// Failed receives an error when a component (a Flux controller, the
// Landform controller, a server) ends on its own, before Stop.
func (e *Env) Failed() <-chan error { return e.failed }

// Stop stops everything Start started, in reverse order, and releases the
// state directory. It reports each step on Options.Progress and returns
// the errors of those that failed. Calling it again returns the same result.
func (e *Env) Stop() error {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return e.stopErr
	}
	e.stopping = true
	stops := e.stops
	e.stops = nil
	e.mu.Unlock()

	var errs []error
	for i := len(stops) - 1; i >= 0; i-- {
		s := stops[i]
		if err := e.step("stopping "+s.name, func() (string, error) { return "stopped", s.fn() }); err != nil {
			errs = append(errs, err)
		}
	}
	if e.lock != nil {
		if err := e.lock.release(); err != nil {
			errs = append(errs, err)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopped = true
	e.stopErr = errors.Join(errs...)
	return e.stopErr
}

// Info is what env.json records of a running environment, for other
// processes (`landform dev cloud ls`, scripts).
type Info struct {
	PID          int    `json:"pid"`
	Kubeconfig   string `json:"kubeconfig"`
	APIServerURL string `json:"apiServerURL"`
	GitURL       string `json:"gitURL"`
	CloudURL     string `json:"cloudURL"`
	Samples      string `json:"samples"`
	EventsURL    string `json:"eventsURL,omitempty"`
	Alerts       string `json:"alerts,omitempty"`
}

// ReadInfo reads env.json of the state directory.
func ReadInfo(stateDir string) (*Info, error) {
	b, err := os.ReadFile(filepath.Join(stateDir, "env.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no environment in %s: start one with `landform dev`", stateDir)
	}
	if err != nil {
		return nil, err
	}
	var i Info
	if err := json.Unmarshal(b, &i); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(stateDir, "env.json"), err)
	}
	return &i, nil
}
