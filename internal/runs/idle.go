package runs

import (
	"github.com/landform-dev/landform/internal/placement"
)

// Idle is a runner with no run, and the slot it holds: a plan's runner
// kept for the apply that may follow at once (the reconcile that collects
// the plan decides). Whoever holds it passes it to Launch or stops it.
type Idle struct {
	rn           *placement.Run
	release      func()
	inputsDigest string
	taken        bool
	log          func(error)
}

// For returns the runner for the next run when it is still free and holds
// the workspace of inputsDigest; nil otherwise.
func (i *Idle) For(inputsDigest string) *Idle {
	if i == nil || i.taken || i.inputsDigest != inputsDigest {
		return nil
	}
	return i
}

// Stop stops the runner and frees its slot unless a run took it.
func (i *Idle) Stop() {
	if i == nil || i.taken {
		return
	}
	i.taken = true
	if err := i.rn.Stop(); err != nil && i.log != nil {
		i.log(err)
	}
	if i.release != nil {
		i.release()
	}
}

// take hands the runner and its slot to a run.
func (i *Idle) take() (*placement.Run, func()) {
	i.taken = true
	return i.rn, i.release
}
