// Package cli is the `landform` command line (also `kubectl landform`): what a
// user does day to day with Terraform objects, from the terminal. Every
// command writes only to the streams it is given, so that tests run it
// against a real API server and compare its output.
package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"

	"github.com/landform-dev/landform/internal/version"
)

// Options configure the command tree.
type Options struct {
	// Streams are stdin, stdout and stderr.
	Streams genericiooptions.IOStreams
	// DisplayName is how the user runs the CLI: "landform", or
	// "kubectl landform" when installed as the kubectl-landform plugin.
	DisplayName string
	// Now is the clock ages are computed from; time.Now when nil.
	Now func() time.Time
	// PollInterval is how often `logs -f` and `reconcile --wait` look
	// again; one second when zero.
	PollInterval time.Duration
	// Commands are added to the root as they are (`dev`, which needs
	// packages this one must not import).
	Commands []*cobra.Command
}

// DisplayNameFor returns the name a user typed to run the binary whose
// base name is base: kubectl runs its plugin kubectl-landform for
// `kubectl landform`.
func DisplayNameFor(base string) string {
	switch base {
	case "kubectl-landform":
		return "kubectl landform"
	case "flux-landform":
		return "flux landform"
	}
	return "landform"
}

// app is what every command shares: the streams, the kubeconfig flags and
// the connection they lead to.
type app struct {
	Options
	flags *genericclioptions.ConfigFlags
}

// NewCommand builds the root command and its subcommands.
func NewCommand(o Options) *cobra.Command {
	if o.DisplayName == "" {
		o.DisplayName = "landform"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.PollInterval == 0 {
		o.PollInterval = time.Second
	}
	a := &app{
		Options: o,
		flags: genericclioptions.NewConfigFlags(true).WithWrapConfigFn(func(c *rest.Config) *rest.Config {
			c.UserAgent = "landform/" + version.Version
			// API warnings (deprecations) go to the user, once each.
			c.WarningHandler = rest.NewWarningWriter(o.Streams.ErrOut, rest.WarningWriterOptions{Deduplicate: true})
			return c
		}),
	}
	root := &cobra.Command{
		Use:   "landform",
		Short: "Landform runs Terraform and OpenTofu modules from GitOps sources",
		Long: "Landform runs Terraform and OpenTofu modules from GitOps sources.\n\n" +
			"This CLI shows Terraform objects, their plans, logs and outputs, approves\n" +
			"plans and gets stuck state locks released. It uses your kubeconfig and\n" +
			"your own permissions.",
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: o.DisplayName},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%v (%s --help lists its flags)", err, c.CommandPath())
	})
	root.SetIn(o.Streams.In)
	root.SetOut(o.Streams.Out)
	root.SetErr(o.Streams.ErrOut)
	a.flags.AddFlags(root.PersistentFlags())
	_ = root.RegisterFlagCompletionFunc("namespace", a.completeNamespaces)
	_ = root.RegisterFlagCompletionFunc("context", a.completeContexts)
	root.AddCommand(
		a.getCommand(),
		a.eventsCommand(),
		a.treeCommand(),
		a.traceCommand(),
		a.exportCommand(),
		a.checkCommand(),
		a.statusCommand(),
		a.planCommand(),
		a.approveCommand(),
		a.replanCommand(),
		a.reconcileCommand(),
		a.suspendCommand(),
		a.resumeCommand(),
		a.logsCommand(),
		a.outputsCommand(),
		a.unlockCommand(),
		a.stateCommand(),
		a.migrateCommand(),
		a.uiCommand(),
		a.versionCommand(),
	)
	root.AddCommand(o.Commands...)
	return root
}

// Execute runs the command line args with ctx (cancelled on Ctrl-C by the
// caller) and returns the error to print, if any.
func Execute(ctx context.Context, o Options, args []string) error {
	root := NewCommand(o)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	// cobra's own message spans lines, with suggestions after the first.
	if err != nil && strings.HasPrefix(err.Error(), "unknown command") {
		lines := strings.Split(err.Error(), "\n")
		var suggestions []string
		for _, l := range lines[1:] {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "Did you mean") {
				suggestions = append(suggestions, l)
			}
		}
		msg := lines[0]
		if len(suggestions) > 0 {
			msg += "; did you mean " + strings.Join(suggestions, " or ") + "?"
		}
		return fmt.Errorf("%s (%s --help lists the commands)", msg, root.CommandPath())
	}
	return err
}

// cmdName is how help texts and hints name a subcommand.
func (a *app) cmdName(sub string) string { return a.DisplayName + " " + sub }

// examples is the Example of the command sub: one indented line for each
// of args, which follow the command's name.
func (a *app) examples(sub string, args ...string) string {
	lines := make([]string, len(args))
	for i, arg := range args {
		lines[i] = strings.TrimRight("  "+a.cmdName(sub)+" "+arg, " ")
	}
	return strings.Join(lines, "\n")
}
