package runner

import (
	"context"
	"os"

	"github.com/hashicorp/terraform-exec/tfexec"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// Apply receives a saved plan, applies it, and streams the logs and the
// outputs. Only a saved plan is ever applied, so what was approved is what
// runs; terraform refuses it when the state moved on (STALE_PLAN).
func (s *Server) Apply(stream runnerpb.Runner_ApplyServer) (err error) {
	ctx, end, err := s.begin(stream.Context(), "Apply")
	if err != nil {
		return err
	}
	defer func() { err = end(err) }()

	first, err := stream.Recv()
	if err != nil {
		return err
	}
	if first.GetOptions() == nil {
		return status.Error(codes.InvalidArgument, "the first message must carry the apply options")
	}
	ws, err := s.requireWorkspace()
	if err != nil {
		return err
	}

	planFile, err := os.CreateTemp(s.tmpDir, "apply-*.tfplan")
	if err != nil {
		return internalError("create plan file", err)
	}
	planPath := planFile.Name()
	planFile.Close()
	os.Remove(planPath)
	defer os.Remove(planPath)
	size, err := receiveFile(planPath, func() ([]byte, error) {
		msg, err := stream.Recv()
		if err != nil {
			return nil, err
		}
		if msg.GetOptions() != nil {
			return nil, status.Error(codes.InvalidArgument, "only the first message may carry options")
		}
		return msg.GetPlanFileChunk(), nil
	})
	if err != nil {
		if _, isStatus := status.FromError(err); isStatus {
			return err
		}
		return internalError("receive plan file", err)
	}
	if size == 0 {
		return status.Error(codes.InvalidArgument, "no plan file received")
	}

	out := &sender[*runnerpb.ApplyEvent]{send: stream.Send}
	logf := applyLog(out)
	if err := s.ensureInit(ctx, ws, logf); err != nil {
		return err
	}
	detach := attachLogs(ws.tf, logf)
	err = ws.tf.Apply(ctx, tfexec.DirOrPlan(planPath))
	detach()
	if err != nil {
		return s.terraformError(ctx, ws, "apply", err, false)
	}
	outputs, err := s.readOutputs(ctx, ws)
	if err != nil {
		return err
	}
	return out.Send(&runnerpb.ApplyEvent{Event: &runnerpb.ApplyEvent_Result{Result: &runnerpb.ApplyResult{Outputs: outputs}}})
}

// Destroy destroys everything in the state, streaming the logs. The final
// result event (with no outputs) tells the client the stream is complete.
func (s *Server) Destroy(_ *runnerpb.DestroyRequest, stream runnerpb.Runner_DestroyServer) (err error) {
	ctx, end, err := s.begin(stream.Context(), "Destroy")
	if err != nil {
		return err
	}
	defer func() { err = end(err) }()

	out := &sender[*runnerpb.ApplyEvent]{send: stream.Send}
	logf := applyLog(out)
	ws, err := s.initialisedWorkspace(ctx, logf)
	if err != nil {
		return err
	}
	detach := attachLogs(ws.tf, logf)
	err = ws.tf.Destroy(ctx)
	detach()
	if err != nil {
		return s.terraformError(ctx, ws, "destroy", err, true)
	}
	return out.Send(&runnerpb.ApplyEvent{Event: &runnerpb.ApplyEvent_Result{Result: &runnerpb.ApplyResult{}}})
}

func applyLog(out *sender[*runnerpb.ApplyEvent]) func(string) {
	return func(line string) {
		_ = out.Send(&runnerpb.ApplyEvent{Event: &runnerpb.ApplyEvent_Log{Log: &runnerpb.LogLine{Text: line}}})
	}
}

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
