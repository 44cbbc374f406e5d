package server

import (
	"context"
	"errors"
	"path/filepath"

	"google.golang.org/grpc/codes"

	"github.com/landform-dev/landform/internal/engines"
	"github.com/landform-dev/landform/runner"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// engineFor returns the engine a run uses: the runner's own (--engine)
// when spec names none, else that exact version, installed and verified
// into the engine directory unless it is there already or is one of the
// runner's own binaries (engines.Installer). The version is known from the
// install, so terraform-exec's version check costs no engine process.
func (s *Server) engineFor(ctx context.Context, spec *runnerpb.EngineSpec) (*engine, error) {
	if spec.GetName() == "" && spec.GetVersion() == "" {
		return s.engine, nil
	}
	path, err := s.installer.Install(ctx, engines.Spec{
		Name:        spec.GetName(),
		Version:     spec.GetVersion(),
		ReleasesURL: spec.GetReleasesUrl(),
		SigningKey:  spec.GetSigningKey(),
	})
	var verification *engines.VerificationError
	var unavailable *engines.UnavailableError
	switch {
	case errors.As(err, &verification):
		return nil, newError(codes.FailedPrecondition, runner.ReasonEngineVerificationFailed, err.Error(), nil)
	case errors.As(err, &unavailable):
		return nil, newError(codes.FailedPrecondition, runner.ReasonEngineUnavailable, err.Error(), nil)
	case err != nil && ctx.Err() != nil:
		return nil, contextStatus(ctx)
	case err != nil:
		return nil, newError(codes.FailedPrecondition, runner.ReasonEngineUnavailable, "installing "+spec.GetName()+" "+spec.GetVersion()+": "+err.Error(), nil)
	}
	if path == s.engine.path {
		return s.engine, nil
	}
	s.installedMu.Lock()
	defer s.installedMu.Unlock()
	if e, ok := s.installed[path]; ok {
		return e, nil
	}
	e, err := newEngine(path, s.engine.launcher, s.interruptGrace)
	if err != nil {
		return nil, newError(codes.Internal, runner.ReasonInternal, err.Error(), nil)
	}
	e.version = spec.GetVersion()
	if e.product == "" {
		e.product = productName(spec.GetName(), filepath.Base(path))
	}
	s.installed[path] = e
	return e, nil
}

// productName is how an engine's `version` names it.
func productName(name, binary string) string {
	if name == engines.OpenTofu || binary == "tofu" {
		return "OpenTofu"
	}
	return "Terraform"
}
