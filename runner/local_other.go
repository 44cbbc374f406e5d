//go:build !linux

package runner

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal has no equivalent outside Linux: there a local runner
// outlives a controller that crashes.
func setParentDeathSignal(*exec.Cmd) {}

// detach starts the runner in a session of its own.
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
}
