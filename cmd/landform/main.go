// Command landform is Landform's CLI. Today it reports its version; the day-to-day
// commands (get, plan show, approve, logs, unlock, dev) follow.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/landform-dev/landform/internal/version"
)

func main() {
	root := &cobra.Command{
		Use:           "landform",
		Short:         "Landform runs Terraform and OpenTofu modules from GitOps sources",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the client version",
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "landform %s\n", version.Version)
		},
	})
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
