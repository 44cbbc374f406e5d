package server

import (
	"context"
	"sort"

	"github.com/hashicorp/terraform-exec/tfexec"
)

// ensureInit runs init once per workspace configuration and engine, then
// selects the terraform workspace. Its output goes to logf.
//
// Providers from the runner's read-only mirrors come through its CLI
// configuration (TF_CLI_CONFIG_FILE, CLIConfig), not -plugin-dir, which
// would keep every other provider from its registry. -upgrade=false keeps
// the dependency lock file in place (an apply's is its plan's).
func (s *Server) ensureInit(ctx context.Context, ws *workspace, logf func(string)) error {
	if ws.initialised {
		return nil
	}
	opts := []tfexec.InitOption{tfexec.Reconfigure(true), tfexec.Upgrade(false)}
	if ws.customBackend == "" {
		backend := ws.terraformBackend()
		keys := make([]string, 0, len(backend))
		for k := range backend {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			opts = append(opts, tfexec.BackendConfig(k+"="+backend[k]))
		}
	}
	detach := attachLogs(ws.tf, logf)
	err := engineResult(ctx, ws.tf.Init(ctx, opts...))
	detach()
	if err != nil {
		return s.terraformError(ctx, ws, "init", err, false)
	}
	if err := ws.engine.learnVersion(ctx, ws.tf); err != nil {
		s.log.Info("engine version unknown", "error", err.Error())
	}
	if err := s.selectWorkspace(ctx, ws); err != nil {
		return err
	}
	ws.initialised = true
	return nil
}

// selectWorkspace selects the spec's terraform workspace, creating it on
// first use. terraform-exec keeps TF_WORKSPACE from the engine, so this
// is the only way one is selected.
func (s *Server) selectWorkspace(ctx context.Context, ws *workspace) error {
	name := ws.workspace
	if name == "" || name == "default" {
		return nil
	}
	existing, current, err := ws.tf.WorkspaceList(ctx)
	if err = engineResult(ctx, err); err != nil {
		return s.terraformError(ctx, ws, "workspace list", err, false)
	}
	if current == name {
		return nil
	}
	for _, w := range existing {
		if w == name {
			if err := engineResult(ctx, ws.tf.WorkspaceSelect(ctx, name)); err != nil {
				return s.terraformError(ctx, ws, "workspace select", err, false)
			}
			return nil
		}
	}
	if err := engineResult(ctx, ws.tf.WorkspaceNew(ctx, name)); err != nil {
		return s.terraformError(ctx, ws, "workspace new", err, false)
	}
	return nil
}

// useEngine makes ws run e. A workspace initialised with another engine
// is initialised again.
func (ws *workspace) useEngine(e *engine) error {
	if ws.tf != nil && ws.engine == e {
		return nil
	}
	tf, err := e.terraform(ws.moduleDir, ws.env)
	if err != nil {
		return internalError("prepare engine", err)
	}
	ws.engine, ws.tf, ws.initialised = e, tf, false
	return nil
}
