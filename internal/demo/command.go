package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/landform-dev/landform/internal/devenv"
)

// NewCommand returns `landform dev demo`: start a fresh embedded
// environment, walk through it, stop everything it started.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	var repo, toolsDir, stateDir string
	var keep bool
	var cluster clusterFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Walk through Landform's whole job on a fresh embedded environment, then stop it",
		Long: `Start a fresh embedded environment (as ` + "`landform dev`" + ` does, in a new state
directory), then, with a line per step: push the demo's manifests to the dev
git server; let a Flux Kustomization apply a Terraform object that creates a
database and a security group in the stand-in cloud (manual approval); add
an app Kustomization that waits for it and substitutes its outputs; approve
the plan with ` + "`landform approve`" + `; push a change and follow it to the cloud and
the Secret; delete everything and check the cloud is empty. Exits non-zero
naming the step that failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if cluster.kubeconfig != "" {
				return runOnCluster(ctx, streams.Out, cluster)
			}
			root, err := devenv.FindRepo(repo)
			if err != nil {
				return err
			}
			if stateDir == "" {
				if stateDir, err = os.MkdirTemp("", "landform-demo-"); err != nil {
					return err
				}
				if !keep {
					defer os.RemoveAll(stateDir)
				}
			}
			if toolsDir == "" {
				toolsDir = os.Getenv("LANDFORM_TOOLS_DIR")
			}
			if toolsDir == "" {
				toolsDir = filepath.Join(root, "bin")
			}
			out := streams.Out
			fmt.Fprintf(out, "==> starting the embedded environment in %s\n", stateDir)
			start := time.Now()
			env, err := devenv.Start(ctx, devenv.Options{StateDir: stateDir, RepoDir: root, ToolsDir: toolsDir, Progress: out})
			if err != nil {
				return fmt.Errorf("starting the embedded environment: %w", err)
			}
			fmt.Fprintf(out, "    environment ready in %s\n", time.Since(start).Round(time.Second))
			runErr := Run(ctx, Options{Env: env, Out: out})
			fmt.Fprintln(out, "\n==> stopping the embedded environment")
			stopErr := env.Stop()
			if runErr != nil {
				return runErr
			}
			return stopErr
		},
	}
	cmd.Flags().StringVar(&repo, "repo", "", "the Landform checkout (default: the one holding the working directory)")
	cmd.Flags().StringVar(&toolsDir, "tools-dir", "", "where make tools put the binaries (default $LANDFORM_TOOLS_DIR, else <repo>/bin)")
	cmd.Flags().StringVar(&stateDir, "state-dir", "", "state directory (default: a new temporary one, removed afterwards)")
	cmd.Flags().BoolVar(&keep, "keep-state", false, "keep the temporary state directory (logs of every component) afterwards")
	cmd.Flags().StringVar(&cluster.kubeconfig, "cluster-kubeconfig", "", "walk through on this cluster (Landform, Flux and a kubelet running, as make demo-cluster starts them) instead of starting the embedded environment")
	cmd.Flags().StringVar(&cluster.gitURL, "git-url", "", "with --cluster-kubeconfig: a repository the demo may push to, holding modules/ (branch main)")
	cmd.Flags().StringVar(&cluster.cloudURL, "cloud-url", "", "with --cluster-kubeconfig: the stand-in cloud's URL, reachable from Pods")
	cmd.Flags().StringVar(&cluster.appImage, "app-image", "localhost/landform-e2e-app:e2e", "with --cluster-kubeconfig: the app's image, present on the node")
	return cmd
}
