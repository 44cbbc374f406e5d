package cli

import (
	"fmt"
	"os/exec"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/landform-dev/landform/internal/ui"
)

// DefaultUIAddress is where `landform ui` listens unless --address says
// otherwise.
const DefaultUIAddress = "127.0.0.1:8421"

func (a *app) uiCommand() *cobra.Command {
	var address string
	var open bool
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve a web view of Terraform objects and their plans on 127.0.0.1, acting as you",
		Long: `Serve a web view on a loopback address: the Terraform objects you may list,
live; each object's pending plan as a resource-by-resource diff with an Approve
button for exactly that plan, its drift, runs and logs, events, outputs
(sensitive ones masked), kept state versions, dependencies and consumers.

The server acts with your kubeconfig's credentials and nothing more: the API
server decides what you see and what you may do, and buttons you may not use
are not shown. The URL it prints carries a token that lets only your browser
in. It opens no browser unless --open is given. Ctrl-C stops it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := a.connect()
			if err != nil {
				return err
			}
			srv, err := ui.New(ui.Options{Config: s.cfg, Client: s.c, Namespace: s.ns, Now: a.Now})
			if err != nil {
				return err
			}
			l, err := srv.Listen(address)
			if err != nil {
				return fmt.Errorf("listening on %s: %w (pick another with --address, or --address=127.0.0.1:0 for any free port)", address, err)
			}
			fmt.Fprintf(a.Streams.Out, "Landform UI for %s: %s\nCtrl-C stops it.\n", s.cfg.Host, srv.URL())
			if open {
				if err := openBrowser(srv.URL()); err != nil {
					fmt.Fprintf(a.Streams.ErrOut, "Could not open a browser (%v): open the URL above.\n", err)
				}
			}
			return srv.Serve(cmd.Context(), l)
		},
	}
	cmd.Flags().StringVar(&address, "address", DefaultUIAddress, "loopback address and port to listen on (127.0.0.1:0 picks a free port)")
	cmd.Flags().BoolVar(&open, "open", false, "open the URL in the default browser")
	return cmd
}

// openBrowser asks the desktop to open url.
func openBrowser(url string) error {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	return exec.Command(name, url).Start()
}
