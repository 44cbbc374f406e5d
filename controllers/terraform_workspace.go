package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/custody"
	"github.com/landform-dev/landform/internal/inputs"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/outcome"
	"github.com/landform-dev/landform/internal/redact"
	"github.com/landform-dev/landform/internal/source"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// workspace is everything a run is made from.
type workspace struct {
	artifact *source.Artifact
	// tarball is the verified artifact in the cache.
	tarball string
	// path is the module's directory inside the artifact.
	path string
	vars *inputs.Vars
	// inputsDigest covers every input of a plan: a different digest means
	// the stored plan no longer applies.
	inputsDigest string
	redactor     *redact.Redactor
	// engine is spec.engine resolved to one version; nil: the runner's own.
	engine *infrav1.EngineStatus
}

// prepareWorkspace resolves the source artifact and the variables.
func (r *TerraformReconciler) prepareWorkspace(ctx context.Context, obj *infrav1.Terraform) (*workspace, error) {
	a, tarball, dir, err := r.fetchArtifact(ctx, obj)
	if err != nil {
		return nil, err
	}
	rel, _, err := source.ModulePath(dir, obj.Spec.Path)
	if err != nil {
		return nil, outcome.Stalling(infrav1.InvalidPathReason, "%v (revision %s); fix spec.path", err, a.Revision)
	}
	mode := inputs.Plan
	if !obj.DeletionTimestamp.IsZero() {
		mode = inputs.Destroy
	}
	vars, err := r.inputs.Vars(ctx, obj, mode)
	if err != nil {
		return nil, err
	}
	if mode == inputs.Plan {
		inputs.Record(obj, vars.Fields)
	}
	engine, err := r.inputs.Engine(ctx, obj, mode)
	if err != nil {
		return nil, err
	}
	ws := &workspace{artifact: a, tarball: tarball, path: rel, vars: vars, redactor: redact.New(vars.Secrets...), engine: engine}
	ws.inputsDigest = inputsDigest(obj, ws)
	return ws, nil
}

// fetchArtifact returns the source's artifact, verified, from the cache.
// An object being deleted whose source (or its artifact) is gone gets the
// artifact it last applied, as kept (custody.Keeper.KeptArtifact).
func (r *TerraformReconciler) fetchArtifact(ctx context.Context, obj *infrav1.Terraform) (a *source.Artifact, tarball, dir string, err error) {
	ref := obj.Spec.SourceRef
	ns := obj.GetSourceNamespace()
	deleting := !obj.DeletionTimestamp.IsZero()
	a, err = source.GetArtifact(ctx, r.Client, r.sourceKinds, ref.Kind, ns, ref.Name)
	switch {
	case deleting && (errors.Is(err, source.ErrSourceNotFound) || errors.Is(err, source.ErrSourceNotReady) || errors.Is(err, source.ErrKindNotServed)):
		return r.state.KeptForDestroy(ctx, obj, err)
	case errors.Is(err, source.ErrKindNotServed):
		// The watch on source kinds wakes the object when the kind appears.
		return nil, "", "", outcome.Stalling(infrav1.SourceKindNotServedReason, "%v", err)
	case errors.Is(err, source.ErrSourceNotFound):
		return nil, "", "", outcome.Retry(infrav1.SourceNotFoundReason, "%v: create the %s or fix spec.sourceRef", err, ref.Kind)
	case errors.Is(err, source.ErrSourceNotReady):
		return nil, "", "", outcome.Retry(infrav1.SourceNotReadyReason, "%v", err)
	case err != nil:
		return nil, "", "", outcome.Retry(infrav1.SourceNotReadyReason, "reading %s %s/%s: %v", ref.Kind, ns, ref.Name, err)
	}
	tarball, dir, err = r.Fetcher.Fetch(ctx, *a)
	switch {
	case err != nil && deleting && custody.KeptDigest(obj) == a.Digest:
		// The same bytes are kept: the source-controller's copy is not needed.
		return r.state.KeptForDestroy(ctx, obj, err)
	case errors.Is(err, source.ErrDigestMismatch):
		return nil, "", "", outcome.Retry(infrav1.DigestMismatchReason, "artifact of %s %s/%s revision %s was rejected: %v", ref.Kind, ns, ref.Name, a.Revision, err)
	case errors.Is(err, source.ErrArtifactTooLarge):
		// The same revision will not shrink: Stalled until the source
		// publishes another one (its watch wakes the object).
		return nil, "", "", outcome.Stalling(infrav1.ArtifactFailedReason, "%v", err)
	case err != nil:
		return nil, "", "", outcome.Retry(infrav1.ArtifactFailedReason, "downloading the artifact of %s %s/%s: %v", ref.Kind, ns, ref.Name, err)
	}
	r.state.KeepAgain(ctx, obj, a)
	return a, tarball, dir, nil
}

// inputsDigest is a digest over everything a plan depends on.
func inputsDigest(obj *infrav1.Terraform, ws *workspace) string {
	h := sha256.New()
	backend := backendConfig(obj, nil)
	keys := make([]string, 0, len(backend))
	for k := range backend {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(h, "artifact=%s\npath=%s\nworkspace=%s\ndestroy=%t\n", ws.artifact.Digest, ws.path, obj.GetWorkspace(), obj.Spec.Destroy)
	for _, k := range keys {
		fmt.Fprintf(h, "backend.%s=%s\n", k, backend[k])
	}
	if obj.Spec.BackendConfig != nil {
		fmt.Fprintf(h, "custom=%s\n", obj.Spec.BackendConfig.CustomConfiguration)
	}
	h.Write(ws.vars.JSON)
	// Only when there are imports, so that the ids of plans made before
	// spec.imports existed (and their approvals) stay the same.
	for _, im := range ws.vars.Imports {
		fmt.Fprintf(h, "\nimport %q=%q", im.To, im.Id)
	}
	// Likewise only with spec.engine: another version is another plan.
	if ws.engine != nil {
		fmt.Fprintf(h, "\nengine=%s %s", ws.engine.Name, ws.engine.Version)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// withSnapshot is a preview's inputs digest: its inputs and the digest of
// the snapshot its plan starts from.
func withSnapshot(inputs, snapshot string) string {
	sum := sha256.Sum256([]byte(inputs + "\nsnapshot=" + snapshot))
	return hex.EncodeToString(sum[:])
}

// backendConfig is the kubernetes backend's configuration: the state Secret
// tfstate-<workspace>-<suffix> in the object's namespace, plus whatever the
// placement adds (how the runner reaches the API server).
func backendConfig(obj *infrav1.Terraform, placement map[string]string) map[string]string {
	cfg := map[string]string{
		"secret_suffix": names.SecretSuffix(obj),
		"namespace":     obj.Namespace,
	}
	for k, v := range placement {
		cfg[k] = v
	}
	return cfg
}

// customBackend is the user's backend block, if any.
func customBackend(obj *infrav1.Terraform) string {
	if obj.Spec.BackendConfig == nil {
		return ""
	}
	return obj.Spec.BackendConfig.CustomConfiguration
}

// workspaceSpec is what the runner needs to set the workspace up.
func workspaceSpec(obj *infrav1.Terraform, ws *workspace, placementBackend map[string]string) *runnerpb.WorkspaceSpec {
	spec := &runnerpb.WorkspaceSpec{
		TarballDigest: ws.artifact.Digest,
		Path:          ws.path,
		VarsJson:      ws.vars.JSON,
		Workspace:     obj.GetWorkspace(),
		CustomBackend: customBackend(obj),
		Imports:       ws.vars.Imports,
	}
	if spec.CustomBackend == "" {
		spec.BackendConfig = backendConfig(obj, placementBackend)
	}
	return spec
}
