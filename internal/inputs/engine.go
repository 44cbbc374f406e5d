package inputs

import (
	"context"
	"errors"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/engines"
	"github.com/landform-dev/landform/internal/outcome"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// EngineSource is where one engine's releases come from: a releases URL
// (empty: the official one) and the armored OpenPGP key their checksums
// must be signed with (empty: the official key).
type EngineSource struct {
	ReleasesURL string
	SigningKey  string
}

// EngineSources configure spec.engine: where each engine's releases come
// from, and the resolver of version constraints.
type EngineSources struct {
	Terraform, OpenTofu EngineSource
	// Resolver resolves constraints against the sources' listings; nil:
	// a resolver with engines' defaults, made once before the workers
	// start (so no reconcile writes the field).
	Resolver *engines.Resolver
}

func (s *EngineSources) source(name string) EngineSource {
	if name == engines.Terraform {
		return s.Terraform
	}
	return s.OpenTofu
}

// Engine resolves spec.engine to one exact version for a plan: nil when
// spec.engine is unset (the runner's own engine). An exact version needs
// no request; a constraint is resolved against the source's listing
// (cached for a while), the newest matching version winning. A version
// that no source offers is EngineNotFound, retried: a mirror that is down
// or not yet synced recovers by itself. For a destroy, when it cannot be
// resolved now (the source is down), the version that made the last plan
// destroys, so that a deletion does not wait for a mirror.
func (r *Resolver) Engine(ctx context.Context, obj *infrav1.Terraform, mode Mode) (*infrav1.EngineStatus, error) {
	e := obj.Spec.Engine
	if e == nil {
		return nil, nil
	}
	v, err := r.Engines.Resolver.Resolve(ctx, e.Name, e.Version, r.Engines.source(e.Name).ReleasesURL)
	if err != nil && mode == Destroy && obj.Status.Plan != nil && obj.Status.Plan.Engine != nil {
		return obj.Status.Plan.Engine.DeepCopy(), nil
	}
	var unavailable *engines.UnavailableError
	switch {
	case errors.As(err, &unavailable):
		return nil, outcome.Retry(infrav1.EngineNotFoundReason, "spec.engine: %v", err)
	case err != nil:
		return nil, outcome.Stalling(infrav1.EngineNotFoundReason, "spec.engine: %v; fix spec.engine.version", err)
	}
	return &infrav1.EngineStatus{Name: e.Name, Version: v}, nil
}

// EngineSpec is what a runner needs to install e: nil for the runner's
// own engine.
func (r *Resolver) EngineSpec(e *infrav1.EngineStatus) *runnerpb.EngineSpec {
	if e == nil {
		return nil
	}
	src := r.Engines.source(e.Name)
	return &runnerpb.EngineSpec{Name: e.Name, Version: e.Version, ReleasesUrl: src.ReleasesURL, SigningKey: src.SigningKey}
}
