// Command landform is Landform's CLI: the commands of internal/cli (get,
// status, events, tree, plan show, approve, replan, reconcile, suspend,
// resume, logs, outputs, unlock, state, migrate, export, check, version,
// and cobra's completion) and dev, with dev demo and dev cloud ls
// (internal/devenv, internal/demo). docs/cli.md documents each one
// (hack/packaging TestCLICommandsDocumented). Installed as kubectl-landform
// it is the kubectl plugin `kubectl landform`, and as flux-landform the
// Flux CLI plugin `flux landform`. Its exit codes are cli.ExitOK,
// ExitError, ExitPending and ExitTimeout (docs/cli.md).
package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/landform-dev/landform/internal/cli"
	"github.com/landform-dev/landform/internal/demo"
	"github.com/landform-dev/landform/internal/devenv"
)

func main() {
	// The CLI reports through its output and errors; controller-runtime's
	// own logging would only complain that it has no logger.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	base := strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe")
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	dev := devenv.NewCommand(streams)
	dev.AddCommand(demo.NewCommand(streams))
	err := cli.Execute(ctx, cli.Options{
		Streams:     streams,
		DisplayName: cli.DisplayNameFor(base),
		Commands:    []*cobra.Command{dev},
	}, os.Args[1:])
	if code := cli.Report(os.Stderr, err); code != cli.ExitOK {
		stop()
		os.Exit(code)
	}
}
