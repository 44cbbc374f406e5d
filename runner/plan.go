package runner

import (
	"bytes"
	"os"

	"github.com/hashicorp/terraform-exec/tfexec"

	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// Plan initialises the workspace if needed, plans, and streams the logs, the
// plan file, the JSON plan, the human plan and the result.
func (s *Server) Plan(req *runnerpb.PlanRequest, stream runnerpb.Runner_PlanServer) (err error) {
	ctx, end, err := s.begin(stream.Context(), "Plan")
	if err != nil {
		return err
	}
	defer func() { err = end(err) }()

	out := &sender[*runnerpb.PlanEvent]{send: stream.Send}
	logf := func(line string) {
		_ = out.Send(&runnerpb.PlanEvent{Event: &runnerpb.PlanEvent_Log{Log: &runnerpb.LogLine{Text: line}}})
	}
	ws, err := s.initialisedWorkspace(ctx, logf)
	if err != nil {
		return err
	}

	planFile, err := os.CreateTemp(s.tmpDir, "plan-*.tfplan")
	if err != nil {
		return internalError("create plan file", err)
	}
	planPath := planFile.Name()
	planFile.Close()
	defer os.Remove(planPath)

	detach := attachLogs(ws.tf, logf)
	hasChanges, err := ws.tf.Plan(ctx, tfexec.Out(planPath), tfexec.Destroy(req.Destroy))
	detach()
	if err != nil {
		return s.terraformError(ctx, ws, "plan", err, true)
	}

	planBytes, err := os.ReadFile(planPath)
	if err != nil {
		return internalError("read plan file", err)
	}
	// show -json goes through terraform-exec, which parses and checks it;
	// the raw bytes are captured on the side for the controller.
	var jsonPlan bytes.Buffer
	ws.tf.SetStdout(&jsonPlan)
	_, err = ws.tf.ShowPlanFile(ctx, planPath)
	ws.tf.SetStdout(nil)
	if err != nil {
		return s.terraformError(ctx, ws, "show -json", err, false)
	}
	humanPlan, err := ws.tf.ShowPlanFileRaw(ctx, planPath)
	if err != nil {
		return s.terraformError(ctx, ws, "show", err, false)
	}
	result, err := summarizePlan(jsonPlan.Bytes())
	if err != nil {
		return internalError("summarize plan", err)
	}
	result.HasChanges = hasChanges
	result.Engine = s.engineVersion(ctx, ws)

	for _, f := range []struct {
		data []byte
		wrap func([]byte) *runnerpb.PlanEvent
	}{
		{planBytes, func(b []byte) *runnerpb.PlanEvent {
			return &runnerpb.PlanEvent{Event: &runnerpb.PlanEvent_PlanFileChunk{PlanFileChunk: b}}
		}},
		{jsonPlan.Bytes(), func(b []byte) *runnerpb.PlanEvent {
			return &runnerpb.PlanEvent{Event: &runnerpb.PlanEvent_JsonPlanChunk{JsonPlanChunk: b}}
		}},
		{[]byte(humanPlan), func(b []byte) *runnerpb.PlanEvent {
			return &runnerpb.PlanEvent{Event: &runnerpb.PlanEvent_HumanPlanChunk{HumanPlanChunk: b}}
		}},
	} {
		if err := sendChunks(f.data, func(b []byte) error { return out.Send(f.wrap(b)) }); err != nil {
			return err
		}
	}
	return out.Send(&runnerpb.PlanEvent{Event: &runnerpb.PlanEvent_Result{Result: result}})
}
