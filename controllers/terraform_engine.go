package controllers

import (
	"context"
	"errors"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/engines"
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
	// a resolver with engines' defaults, made once in SetupWithManager
	// (before the workers start, so no reconcile writes the field).
	Resolver *engines.Resolver
}

func (s *EngineSources) source(name string) EngineSource {
	if name == engines.Terraform {
		return s.Terraform
	}
	return s.OpenTofu
}

// resolveEngine resolves spec.engine to one exact version for a plan: nil
// when spec.engine is unset (the runner's own engine). An exact version
// needs no request; a constraint is resolved against the source's listing
// (cached for a while), the newest matching version winning. A version
// that no source offers is EngineNotFound, retried: a mirror that is down
// or not yet synced recovers by itself.
func (r *TerraformReconciler) resolveEngine(ctx context.Context, obj *infrav1.Terraform) (*infrav1.EngineStatus, error) {
	e := obj.Spec.Engine
	if e == nil {
		return nil, nil
	}
	v, err := r.Engines.Resolver.Resolve(ctx, e.Name, e.Version, r.Engines.source(e.Name).ReleasesURL)
	var unavailable *engines.UnavailableError
	switch {
	case errors.As(err, &unavailable):
		return nil, retry(infrav1.EngineNotFoundReason, "spec.engine: %v", err)
	case err != nil:
		return nil, stalling(infrav1.EngineNotFoundReason, "spec.engine: %v; fix spec.engine.version", err)
	}
	return &infrav1.EngineStatus{Name: e.Name, Version: v}, nil
}

// engineForDestroy is the engine that destroys: spec.engine resolved, or,
// when it cannot be resolved now (the source is down), the version that
// made the last plan, so that a deletion does not wait for a mirror.
func (r *TerraformReconciler) engineForDestroy(ctx context.Context, obj *infrav1.Terraform) (*infrav1.EngineStatus, error) {
	e, err := r.resolveEngine(ctx, obj)
	if err != nil && obj.Status.Plan != nil && obj.Status.Plan.Engine != nil {
		return obj.Status.Plan.Engine.DeepCopy(), nil
	}
	return e, err
}

// planEngine is the engine version that made plan id, as status records
// it; nil when spec.engine chose none.
func planEngine(obj *infrav1.Terraform, id string) *infrav1.EngineStatus {
	if p := obj.Status.Plan; p != nil && p.ID == id && p.Engine != nil {
		return p.Engine.DeepCopy()
	}
	return nil
}

// engineSpec is what a runner needs to install e: nil for the runner's
// own engine.
func (r *TerraformReconciler) engineSpec(e *infrav1.EngineStatus) *runnerpb.EngineSpec {
	if e == nil {
		return nil
	}
	src := r.Engines.source(e.Name)
	return &runnerpb.EngineSpec{Name: e.Name, Version: e.Version, ReleasesUrl: src.ReleasesURL, SigningKey: src.SigningKey}
}
