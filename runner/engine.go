package runner

import (
	"bytes"
	"context"
	"path/filepath"
	"sort"
	"strings"
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

// engineVersion names the engine and its version as the first line of
// `version` does, e.g. "OpenTofu v1.12.6" or "Terraform v1.5.7", from the
// version a JSON plan records (planned). Only an engine whose binary name
// does not tell which it is costs a `version` process (once per runner).
func (s *Server) engineVersion(ctx context.Context, ws *workspace, planned string) string {
	if s.engineName != "" {
		return s.engineName
	}
	if product := engineProduct(s.engine); product != "" && planned != "" {
		s.engineName = product + " v" + planned
		return s.engineName
	}
	var out bytes.Buffer
	if err := ws.tf.run(ctx, &out, "version"); err != nil {
		s.log.Info("engine version unknown", "error", err.Error())
		return ""
	}
	line, _, _ := strings.Cut(out.String(), "\n")
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
