package runner

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-exec/tfexec"
)

// newTerraform returns a terraform-exec handle for dir.
func (s *Server) newTerraform(dir string, env map[string]string) (*tfexec.Terraform, error) {
	tf, err := tfexec.NewTerraform(dir, s.engine)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	if err := tf.SetEnv(env); err != nil {
		return nil, fmt.Errorf("engine environment: %w", err)
	}
	// terraform-exec sends SIGINT when the context ends (terraform then
	// stops its operations, writes the state and releases the lock) and
	// kills after this delay.
	if err := tf.SetWaitDelay(s.interruptGrace); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	return tf, nil
}

// ensureInit runs init once per workspace configuration, then selects the
// terraform workspace. Its output goes to logf.
func (s *Server) ensureInit(ctx context.Context, ws *workspace, logf func(string)) error {
	if ws.initialised {
		return nil
	}
	opts := []tfexec.InitOption{tfexec.Reconfigure(true)}
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
	err := ws.tf.Init(ctx, opts...)
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
	existing, current, err := ws.tf.WorkspaceList(ctx)
	if err != nil {
		return s.terraformError(ctx, ws, "workspace list", err, false)
	}
	if current == name {
		return nil
	}
	for _, w := range existing {
		if w == name {
			if err := ws.tf.WorkspaceSelect(ctx, name); err != nil {
				return s.terraformError(ctx, ws, "workspace select", err, false)
			}
			return nil
		}
	}
	if err := ws.tf.WorkspaceNew(ctx, name); err != nil {
		return s.terraformError(ctx, ws, "workspace new", err, false)
	}
	return nil
}

// engineVersion names the engine and its version as the first line of
// `version` does, e.g. "OpenTofu v1.12.6" or "Terraform v1.5.7". The
// version comes from terraform-exec, which reads it once per workspace
// anyway; only an engine whose binary name does not tell which it is costs
// a `version` process (once per runner).
func (s *Server) engineVersion(ctx context.Context, ws *workspace) string {
	if s.engineName != "" {
		return s.engineName
	}
	if product := engineProduct(s.engine); product != "" {
		if v, _, err := ws.tf.Version(ctx, false); err == nil {
			s.engineName = product + " v" + v.String()
			return s.engineName
		}
	}
	cmd := exec.CommandContext(ctx, s.engine, "version")
	cmd.Dir = ws.moduleDir
	cmd.Env = envList(ws.env)
	out, err := cmd.Output()
	if err != nil {
		s.log.Info("engine version unknown", "error", err.Error())
		return ""
	}
	line, _, _ := strings.Cut(string(out), "\n")
	s.engineName = strings.TrimSpace(line)
	return s.engineName
}

// engineProduct tells the engine by its binary's name: OpenTofu for tofu*,
// Terraform for terraform*, "" otherwise.
func engineProduct(binary string) string {
	switch base := filepath.Base(binary); {
	case strings.HasPrefix(base, "tofu"):
		return "OpenTofu"
	case strings.HasPrefix(base, "terraform"):
		return "Terraform"
	}
	return ""
}
