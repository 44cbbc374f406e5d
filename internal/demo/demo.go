// Package demo is the walkthrough `make demo` runs on the embedded
// environment (`landform dev`): infrastructure from Git through a Flux
// Kustomization, a plan approved with `landform approve`, an app whose
// Kustomization waits for it and receives its outputs, a change pushed to
// Git flowing through to the cloud and the Secret, and deletion destroying
// the cloud objects. Every step prints what it does and checks its effect;
// the first failing step ends the walkthrough with an error naming it.
package demo

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/landform-dev/landform/internal/cloud"
	"github.com/landform-dev/landform/internal/devenv"
	"github.com/landform-dev/landform/internal/gitops"
)

// Namespace is where the walkthrough's objects live.
const Namespace = "demo"

// Options configure Run.
type Options struct {
	// Env is the running environment.
	Env *devenv.Env
	// Node, when set, says a real kubelet runs Pods (`make demo-cluster`):
	// runner Pods need the cloud's endpoint, and the app's Pod is seen
	// waiting for the outputs Secret, then running with it.
	Node *Node
	// Out receives the step lines.
	Out io.Writer
	// StepTimeout bounds each step's waiting. Default 5 minutes.
	StepTimeout time.Duration
}

// Node is what the walkthrough needs on a real node.
type Node struct {
	// AppImage is the app's image (e2e/cluster/app), present on the node.
	AppImage string
}

// step is one numbered part of the walkthrough.
type step struct {
	title string
	run   func(ctx context.Context, w *walk) error
}

// walk is the state the steps share.
type walk struct {
	opts  Options
	cloud *cloud.Client
	repo  *gitops.Workdir
	// sgID is the security group the first apply created.
	sgID string
}

// Run walks through every step, printing one line per step and per check.
func Run(ctx context.Context, o Options) error {
	if o.StepTimeout == 0 {
		o.StepTimeout = 5 * time.Minute
	}
	w := &walk{opts: o, cloud: &cloud.Client{URL: o.Env.CloudURL}}
	steps := []step{
		{"push the demo's manifests to the dev git server", pushManifests},
		{"infrastructure: a Flux Kustomization applies a Terraform object (database + security group, manual approval)", createInfra},
		{appTitle(o.Node), createApp},
		{"approve the pending plan with `landform approve`", approveFirstPlan},
		{"a change pushed to Git flows through to the cloud and the Secret", pushChange},
		{"a pull request is planned against a snapshot of the state, never applied", previewPullRequest},
		{"deletion destroys the cloud objects", deleteAll},
	}
	defer w.cleanup()
	for i, s := range steps {
		fmt.Fprintf(o.Out, "\n==> step %d/%d: %s\n", i+1, len(steps), s.title)
		start := time.Now()
		ctx, cancel := context.WithTimeout(ctx, o.StepTimeout)
		err := s.run(ctx, w)
		cancel()
		if err != nil {
			return fmt.Errorf("step %d (%s) failed: %w", i+1, s.title, err)
		}
		fmt.Fprintf(o.Out, "    done in %s\n", time.Since(start).Round(100*time.Millisecond))
	}
	fmt.Fprintf(o.Out, "\nThe walkthrough succeeded. To keep exploring, run `make dev` and follow what it prints.\n")
	return nil
}

func appTitle(node *Node) string {
	if node != nil {
		return "app: a Kustomization applies the app at once; its Pod waits for the outputs Secret"
	}
	return "app: a Kustomization that dependsOn the infrastructure and substitutes its outputs"
}

// say prints one check or fact under the current step.
func (w *walk) say(format string, args ...any) {
	fmt.Fprintf(w.opts.Out, "    "+format+"\n", args...)
}

func (w *walk) cleanup() {
	if w.repo != nil {
		w.repo.Remove()
	}
}
