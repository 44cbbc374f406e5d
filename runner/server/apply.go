package server

import (
	"bytes"
	"context"
	"os"
	"path/filepath"

	"github.com/hashicorp/terraform-exec/tfexec"

	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// apply applies a saved plan file and returns the outputs. Only a saved
// plan is ever applied, so what was approved is what runs; terraform
// refuses it when the state moved on (STALE_PLAN).
// A state the engine could not write is written by the runner before the
// run ends (saveErroredState).
func (s *Server) apply(ctx context.Context, ws *workspace, planPath string, locked bool, r *run) ([]*runnerpb.Output, error) {
	err := s.runWithOwnPipes(ctx, ws, r.log, func() error {
		return ws.tf.Apply(ctx, tfexec.DirOrPlan(planPath), tfexec.Lock(!locked))
	})
	if err = s.saveErroredState(ctx, ws, r, "apply", err); err != nil {
		return nil, s.terraformError(ctx, ws, "apply", err, false)
	}
	return s.readOutputs(ctx, ws)
}

// destroy destroys everything in the state.
func (s *Server) destroy(ctx context.Context, ws *workspace, locked bool, r *run) error {
	err := s.runWithOwnPipes(ctx, ws, r.log, func() error {
		return ws.tf.Destroy(ctx, tfexec.Lock(!locked), tfexec.LockTimeout("0s"))
	})
	if err = s.saveErroredState(ctx, ws, r, "destroy", err); err != nil {
		return s.terraformError(ctx, ws, "destroy", err, true)
	}
	return nil
}

// useLockFile makes the module use the dependency lock file a plan was made
// with, so that the apply installs exactly the plan's providers. A lock
// file that differs from the one in place means init again.
func (s *Server) useLockFile(ws *workspace, data []byte) error {
	path := filepath.Join(ws.moduleDir, lockFileName)
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
		return nil
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return internalError("write the dependency lock file", err)
	}
	ws.initialised = false
	return nil
}
