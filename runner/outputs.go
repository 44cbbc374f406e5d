package runner

import (
	"context"
	"sort"

	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// readOutputs runs `output -json`, sorted by name. Sensitive values are
// included (the controller writes them to a Secret); sensitivity travels
// with each so that nothing else ever shows them.
func (s *Server) readOutputs(ctx context.Context, ws *workspace) ([]*runnerpb.Output, error) {
	metas, err := ws.tf.Output(ctx)
	if err != nil {
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
