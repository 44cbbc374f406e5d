package devenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// ToolsDirEnv overrides where `landform dev` finds the tools.
const ToolsDirEnv = "LANDFORM_TOOLS_DIR"

// modulePath identifies a Landform checkout by its go.mod.
const modulePath = "github.com/landform-dev/landform"

// NewCommand returns the `dev` command: `landform dev` runs the environment
// until Ctrl-C, `landform dev cloud ls` lists the stand-in cloud's objects.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	var (
		o         Options
		repo      string
		stateDir  string
		uiAddress string
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a complete local environment: API server, Flux, git server, stand-in cloud and Landform",
		Long: `Run a complete local environment until Ctrl-C: etcd and kube-apiserver, the
garbage collector (kube-controller-manager), the Landform and Flux CRDs, Flux's source-controller and kustomize-controller, a
git server seeded with this repository's modules/ (push enabled), the
stand-in cloud and the Landform controller with local runners.

Everything is kept in --state-dir, so a restart keeps the objects, the
repositories and the cloud's contents; ports are kept too, so stored URLs
stay valid. The tools come from ` + "`make tools`" + ` (--tools-dir).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			var err error
			if o.StateDir, err = resolveStateDir(stateDir); err != nil {
				return err
			}
			if o.RepoDir, err = FindRepo(repo); err != nil {
				return err
			}
			if o.ToolsDir == "" {
				o.ToolsDir = os.Getenv(ToolsDirEnv)
			}
			return run(ctx, streams, o, uiAddress)
		},
	}
	cmd.PersistentFlags().StringVar(&stateDir, "state-dir", "", "directory holding the environment's state (default ~/.landform/dev)")
	cmd.Flags().StringVar(&o.ToolsDir, "tools-dir", "", "directory of the tools that make tools installs (default $"+ToolsDirEnv+", else the checkout's bin/)")
	cmd.Flags().StringVar(&repo, "repo", "", "the Landform checkout (default: the one holding the working directory, else the running executable)")
	cmd.Flags().IntVar(&o.APIServerPort, "api-port", 0, "kube-apiserver port (default: the previous run's, else a free one)")
	cmd.Flags().IntVar(&o.GitPort, "git-port", 0, "git server port (default: the previous run's, else a free one)")
	cmd.Flags().IntVar(&o.CloudPort, "cloud-port", 0, "stand-in cloud port (default: the previous run's, else a free one)")
	cmd.Flags().StringVar(&uiAddress, "ui-address", DefaultUIAddress, "loopback address of the web view (landform ui); a free port when the default is taken")

	cloudCmd := &cobra.Command{
		Use:   "cloud",
		Short: "Inspect the stand-in cloud of the running environment",
		Args:  cobra.NoArgs,
	}
	cloudCmd.AddCommand(&cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the security groups and databases in the stand-in cloud",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := resolveStateDir(stateDir)
			if err != nil {
				return err
			}
			info, err := ReadInfo(dir)
			if err != nil {
				return err
			}
			if info.CloudURL == "" {
				return fmt.Errorf("%s names no stand-in cloud", filepath.Join(dir, "env.json"))
			}
			ctx, cancel := context.WithTimeout(cmdContext(cmd), 10*time.Second)
			defer cancel()
			return ListCloud(ctx, info.CloudURL, streams.Out)
		},
	})
	cmd.AddCommand(cloudCmd)
	return cmd
}

// run starts the environment, waits for Ctrl-C (ctx) or a component's
// failure, and stops it.
func run(ctx context.Context, streams genericiooptions.IOStreams, o Options, uiAddress string) error {
	out := streams.Out
	o.Progress = out
	if err := os.MkdirAll(filepath.Join(o.StateDir, "logs"), 0o700); err != nil {
		return fmt.Errorf("creating the state dir: %w", err)
	}
	closeLog, err := redirectLibraryLogs(filepath.Join(o.StateDir, "logs", "landform-dev.log"))
	if err != nil {
		return err
	}
	defer closeLog()

	fmt.Fprintf(out, "Starting the Landform dev environment in %s\n", o.StateDir)
	started := time.Now()
	env, err := Start(ctx, o)
	if err != nil && ctx.Err() != nil {
		// Whatever failed, it failed because of the interrupt.
		return errors.New("interrupted while starting: stopped what had started")
	}
	if err != nil {
		return err
	}
	if err := env.serveUI(ctx, uiAddress); err != nil {
		return errors.Join(err, env.Stop())
	}
	env.PrintNextSteps(out, time.Since(started))

	var failure error
	select {
	case <-ctx.Done():
		fmt.Fprintf(out, "\nStopping (the state in %s is kept)\n", env.StateDir)
	case failure = <-env.Failed():
		fmt.Fprintf(out, "\n%v\nStopping everything else (the state in %s is kept)\n", failure, env.StateDir)
	}
	return errors.Join(failure, env.Stop())
}

// PrintNextSteps writes where everything is and what to try.
func (e *Env) PrintNextSteps(w io.Writer, took time.Duration) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	fmt.Fprintf(bw, "\nThe environment is up (%s). Ctrl-C stops it; %s keeps its state.\n\n", took.Round(100*time.Millisecond), e.StateDir)
	fmt.Fprintf(bw, "  export KUBECONFIG=%s\n\n", e.Kubeconfig)
	for _, r := range [][2]string{
		{"API server", e.APIServerURL},
		{"git", e.GitURL + "   (branch main, push enabled)"},
		{"cloud", e.CloudURL + "   (" + CloudEndpointEnv + " of the runners)"},
		{"logs", filepath.Join(e.StateDir, "logs") + string(filepath.Separator)},
		{"UI", e.UIURL},
	} {
		if r[1] != "" {
			fmt.Fprintf(bw, "  %-11s %s\n", r[0], r[1])
		}
	}
	fmt.Fprintf(bw, "\nWhat to try next:\n")
	for _, r := range [][2]string{
		{"kubectl apply -f " + e.Samples, "a GitRepository on the dev git server and a Terraform object on modules/hello"},
		{"landform get", "watch it plan and apply (Ready in a few seconds)"},
		{"landform outputs hello", "its outputs, also in Secret hello-outputs"},
		{"landform dev cloud ls", "what exists in the stand-in cloud"},
		{"kubectl apply -f " + e.Alerts, "Flux alerts on Terraform objects: notifications in " + filepath.Join("logs", "alerts.log")},
		{"git clone " + e.GitURL, "change or add modules and push: source-controller sees it within a minute"},
	} {
		fmt.Fprintf(bw, "  %-*s  # %s\n", nextStepWidth(e), r[0], r[1])
	}
}

func nextStepWidth(e *Env) int {
	return max(len("kubectl apply -f "+e.Samples), len("kubectl apply -f "+e.Alerts), len("git clone "+e.GitURL))
}

// redirectLibraryLogs sends what controller-runtime and client-go log
// globally to a file: the terminal shows only the steps.
func redirectLibraryLogs(path string) (func(), error) {
	f, err := openLog(path)
	if err != nil {
		return nil, err
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(f)))
	klog.LogToStderr(false)
	klog.SetOutput(f)
	return func() { klog.Flush(); f.Close() }, nil
}

func cmdContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

func resolveStateDir(dir string) (string, error) {
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no home directory for the default --state-dir: %w", err)
		}
		dir = filepath.Join(home, ".landform", "dev")
	}
	return filepath.Abs(dir)
}

// FindRepo returns the Landform checkout: dir if given, else the one
// holding the working directory, else the one holding the executable
// (bin/landform).
func FindRepo(dir string) (string, error) {
	if dir != "" {
		if !isCheckout(dir) {
			return "", fmt.Errorf("--repo %s is not a Landform checkout (no go.mod of %s)", dir, modulePath)
		}
		return filepath.Abs(dir)
	}
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			starts = append(starts, filepath.Dir(exe))
		}
	}
	for _, start := range starts {
		for d := start; ; d = filepath.Dir(d) {
			if isCheckout(d) {
				return d, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", errors.New("not inside a Landform checkout: run landform dev from the repository (it seeds the git server with its modules/ and installs its CRDs), or pass --repo")
}

func isCheckout(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "module ") {
			return strings.TrimSpace(strings.TrimPrefix(line, "module ")) == modulePath
		}
	}
	return false
}
