package devenv

import (
	"context"
	"fmt"

	"github.com/landform-dev/landform/internal/ui"
)

// DefaultUIAddress is where the dev environment serves `landform ui`; a
// free port when it is taken.
const DefaultUIAddress = "127.0.0.1:8421"

// serveUI serves the web view with the environment's admin kubeconfig
// until ctx ends, and records its URL (with its token) for the next
// steps.
func (e *Env) serveUI(ctx context.Context, address string) error {
	srv, err := ui.New(ui.Options{Config: e.Config, Namespace: "default"})
	if err != nil {
		return err
	}
	l, err := srv.Listen(address)
	if err != nil && address == DefaultUIAddress {
		l, err = srv.Listen("127.0.0.1:0")
	}
	if err != nil {
		return fmt.Errorf("serving the UI on %s: %w", address, err)
	}
	e.UIURL = srv.URL()
	go func() {
		if err := srv.Serve(ctx, l); err != nil && ctx.Err() == nil {
			e.fail(fmt.Errorf("the UI stopped: %w", err))
		}
	}()
	return nil
}
