package runner

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// DefaultInterruptGrace is how long terraform gets to stop after an
// interrupt before it is killed. Terraform waits for in-flight provider calls
// and then writes the state and releases its lock; killing it earlier can
// leave both behind. The controller counts it in its own waits for a run.
const DefaultInterruptGrace = 60 * time.Second

// Action is what a run does. It is the one name of an action from
// status.run.action (a string in the API) through internal/runs and this
// client to the runner's protocol (runnerpb.Action, mapped in
// client_run.go only) and the run log's phase.
type Action string

// The actions of a run.
const (
	Plan    Action = "plan"
	Apply   Action = "apply"
	Destroy Action = "destroy"
)

// RunSpec is one run as the controller asks for it.
type RunSpec struct {
	// ID identifies the run; starting the same id twice starts it once.
	ID     string
	Action Action
	// Destroy plans the destruction of everything (Plan).
	Destroy bool
	// Deadline bounds the run, counted by the runner from its start.
	Deadline time.Duration
	// PlanFile is the saved plan to apply (Apply).
	PlanFile []byte
	// LockFile is the dependency lock file the plan was made with
	// (Apply).
	LockFile []byte
	// StateToken is the bearer token of the object's state identity (see
	// runnerpb.RunSpec.state_token); never logged.
	StateToken string
	// Engine is the engine version to run with; nil: the runner's own.
	Engine *runnerpb.EngineSpec
}

// RunResult is what a run produced.
type RunResult struct {
	// Plan is a plan run's output.
	Plan *PlanOutput
	// Outputs are the outputs after an apply.
	Outputs []*runnerpb.Output
}

// PlanOutput is everything a plan produced.
type PlanOutput struct {
	Result    *runnerpb.PlanResult
	PlanFile  []byte
	JSONPlan  []byte
	HumanPlan []byte
	// LockFile is the dependency lock file the plan was made with.
	LockFile []byte
}

// NewRunID returns a run id that no other run of any object shares.
func NewRunID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "run-" + hex.EncodeToString(b)
}
