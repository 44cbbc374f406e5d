package controllers

import (
	"context"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/planstore"
	"github.com/landform-dev/landform/internal/runs"
	"github.com/landform-dev/landform/runner"
)

// runAction is one kind of run: the run it asks of a runner, and what its
// end means for the object. Its name (runner.Plan, runner.Apply,
// runner.Destroy) is the one vocabulary of actions, from status.run.action
// to the runner's protocol. Starting any action is startRun; collecting
// any is inspectRun, which asks actionOf which one ended. A new kind of
// run is a new type here, started and collected the same way.
type runAction interface {
	// request is the run to start for obj from ws.
	request(r *TerraformReconciler, obj *infrav1.Terraform, ws *workspace) runs.Request
	// collect records how run ended (h is finished); idle is the runner
	// a plan that succeeded leaves for its apply.
	collect(ctx context.Context, r *TerraformReconciler, obj *infrav1.Terraform, run *infrav1.RunStatus, h *runs.Handle, idle *runs.Idle) (*collected, error)
}

// planRun plans the changes the inputs ask for; a destroy plan (spec.destroy,
// or deletion behind destroyApproval manual) plans the destruction of
// everything.
type planRun struct {
	drift, destroy bool
	priority       runs.Priority
}

// applyRun applies plan, on idle (the runner that made it) when it is
// still at hand.
type applyRun struct {
	plan *planstore.Plan
	idle *runs.Idle
}

// destroyRun destroys the resources (deletion, deletionPolicy Delete).
type destroyRun struct{}

// actionOf is the action of a run recorded in status.run.
func actionOf(run *infrav1.RunStatus) runAction {
	switch runner.Action(run.Action) {
	case runner.Apply:
		return applyRun{}
	case runner.Destroy:
		return destroyRun{}
	}
	return planRun{destroy: run.Destroy, drift: run.Drift}
}

// newRequest is a run of action for obj from ws, as status.run records it.
func newRequest(r *TerraformReconciler, ws *workspace, action runner.Action, priority runs.Priority) runs.Request {
	return runs.Request{
		Run:       infrav1.RunStatus{Action: string(action), Revision: ws.artifact.Revision, InputsDigest: ws.inputsDigest, Engine: ws.engine},
		Spec:      runner.RunSpec{Engine: r.inputs.EngineSpec(ws.engine)},
		Priority:  priority,
		Workspace: ws.forRunner(),
		Redactor:  ws.redactor,
	}
}

func (a planRun) request(r *TerraformReconciler, obj *infrav1.Terraform, ws *workspace) runs.Request {
	req := newRequest(r, ws, runner.Plan, a.priority)
	req.Run.Drift, req.Run.Destroy = a.drift, a.destroy
	return req
}

func (planRun) collect(ctx context.Context, r *TerraformReconciler, obj *infrav1.Terraform, run *infrav1.RunStatus, h *runs.Handle, idle *runs.Idle) (*collected, error) {
	res, err := h.Result()
	if err != nil {
		return &collected{failed: run}, r.runFailed(ctx, obj, run, h, infrav1.PlannedCondition, infrav1.PlanFailedReason, infrav1.PlanTimeoutReason)
	}
	p, err := r.recordPlan(ctx, obj, run, res.Plan, h.Redactor())
	if err != nil {
		idle.Stop()
		return nil, err
	}
	return &collected{idle: idle, plan: p}, nil
}

// request applies a.plan with the engine version that made it, whatever
// spec.engine resolves to now.
func (a applyRun) request(r *TerraformReconciler, obj *infrav1.Terraform, ws *workspace) runs.Request {
	p := a.plan
	req := newRequest(r, ws, runner.Apply, runs.User)
	engine := planEngine(obj, p.ID)
	req.Run.Plan, req.Run.Revision, req.Run.InputsDigest = p.ID, p.Revision, p.InputsDigest
	req.Run.ArtifactDigest, req.Run.Engine = ws.artifact.Digest, engine
	req.Spec.PlanFile, req.Spec.LockFile, req.Spec.Engine = p.PlanFile, p.LockFile, r.inputs.EngineSpec(engine)
	if req.Reuse = a.idle.For(ws.inputsDigest); req.Reuse != nil {
		req.Workspace = nil
	}
	return req
}

func (applyRun) collect(ctx context.Context, r *TerraformReconciler, obj *infrav1.Terraform, run *infrav1.RunStatus, h *runs.Handle, _ *runs.Idle) (*collected, error) {
	if err := r.collectApply(ctx, obj, run, h); err != nil {
		return &collected{failed: run}, err
	}
	// The plan stays stored, applied: status.lastAppliedPlan says so.
	return &collected{applied: &storedPlan{ID: run.Plan, InputsDigest: run.InputsDigest, Applied: true}}, nil
}

func (destroyRun) request(r *TerraformReconciler, obj *infrav1.Terraform, ws *workspace) runs.Request {
	return newRequest(r, ws, runner.Destroy, runs.User)
}

func (destroyRun) collect(ctx context.Context, r *TerraformReconciler, obj *infrav1.Terraform, run *infrav1.RunStatus, h *runs.Handle, _ *runs.Idle) (*collected, error) {
	if err := r.collectDestroy(ctx, obj, run, h); err != nil {
		return nil, err
	}
	return &collected{destroyed: true}, nil
}
