package server

import (
	"context"
	"errors"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/tfstate"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// Outputs reads the outputs from the state.
func (s *Server) Outputs(ctx context.Context, _ *runnerpb.OutputsRequest) (resp *runnerpb.OutputsResponse, err error) {
	ctx, end, err := s.begin(ctx, "Outputs")
	if err != nil {
		return nil, err
	}
	defer func() { err = end(err) }()

	// Init output has nowhere to go in a unary call.
	ws, err := s.initialisedWorkspace(ctx, func(string) {})
	if err != nil {
		return nil, err
	}
	outputs, err := s.readOutputs(ctx, ws)
	if err != nil {
		return nil, err
	}
	return &runnerpb.OutputsResponse{Outputs: outputs}, nil
}

// readOutputs returns the outputs of ws's state, sorted by name. Sensitive
// values are included (the controller writes them to a Secret);
// sensitivity travels with each so that nothing else ever shows them.
// With the kubernetes backend they are read from the state Secret the
// engine has just written, one request and no engine process; otherwise,
// or when that state is not plain (OpenTofu state encryption), through
// `output -json`.
func (s *Server) readOutputs(ctx context.Context, ws *workspace) ([]*runnerpb.Output, error) {
	if ws.customBackend == "" {
		outs, err := s.stateOutputs(ctx, ws)
		if err == nil {
			return outs, nil
		}
		if !errors.Is(err, tfstate.ErrNotPlain) {
			s.log.Info("reading the outputs from the state Secret failed; asking the engine", "error", err.Error())
		}
	}
	return s.engineOutputs(ctx, ws)
}

// stateOutputs reads the outputs from the kubernetes backend's state
// Secret, as the runner reaches the state (with the state token when there
// is one).
func (s *Server) stateOutputs(ctx context.Context, ws *workspace) ([]*runnerpb.Output, error) {
	c, ns, err := s.stateClient(ws)
	if err != nil {
		return nil, err
	}
	name := statelock.StateSecretName(ws.workspace, ws.backendConfig["secret_suffix"])
	secret, err := c.Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return tfstate.DecodeOutputs(secret.Data[tfstate.DataKey])
}

// engineOutputs runs `output -json`.
func (s *Server) engineOutputs(ctx context.Context, ws *workspace) ([]*runnerpb.Output, error) {
	metas, err := ws.tf.Output(ctx)
	if err = engineResult(ctx, err); err != nil {
		return nil, s.terraformError(ctx, ws, "output", err, false)
	}
	names := make([]string, 0, len(metas))
	for name := range metas {
		names = append(names, name)
	}
	sort.Strings(names)
	outputs := make([]*runnerpb.Output, 0, len(names))
	for _, name := range names {
		m := metas[name]
		outputs = append(outputs, &runnerpb.Output{
			Name:      name,
			ValueJson: []byte(m.Value),
			Sensitive: m.Sensitive,
			TypeJson:  []byte(m.Type),
		})
	}
	return outputs, nil
}
