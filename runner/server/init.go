package server

import (
	"context"
	"sort"
)

// ensureInit runs init once per workspace configuration, then selects the
// terraform workspace. Its output goes to logf.
func (s *Server) ensureInit(ctx context.Context, ws *workspace, logf func(string)) error {
	if ws.initialised {
		return nil
	}
	var backendConfig []string
	if ws.customBackend == "" {
		backend := ws.terraformBackend()
		keys := make([]string, 0, len(backend))
		for k := range backend {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			backendConfig = append(backendConfig, k+"="+backend[k])
		}
	}
	detach := attachLogs(ws.tf, logf)
	err := ws.tf.init(ctx, backendConfig)
	detach()
	if err != nil {
		return s.terraformError(ctx, ws, "init", err, false)
	}
	if err := s.selectWorkspace(ctx, ws); err != nil {
		return err
	}
	ws.initialised = true
	return nil
}

// selectWorkspace selects the spec's terraform workspace, creating it on
// first use.
func (s *Server) selectWorkspace(ctx context.Context, ws *workspace) error {
	name := ws.workspace
	if name == "" || name == "default" {
		return nil
	}
	existing, current, err := ws.tf.workspaces(ctx)
	if err != nil {
		return s.terraformError(ctx, ws, "workspace list", err, false)
	}
	if current == name {
		return nil
	}
	for _, w := range existing {
		if w == name {
			if err := ws.tf.selectWorkspace(ctx, name); err != nil {
				return s.terraformError(ctx, ws, "workspace select", err, false)
			}
			return nil
		}
	}
	if err := ws.tf.newWorkspace(ctx, name); err != nil {
		return s.terraformError(ctx, ws, "workspace new", err, false)
	}
	return nil
}
