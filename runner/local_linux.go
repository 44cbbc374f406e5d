package runner

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel send SIGTERM to the runner when the
// controller dies, so that the runner still interrupts terraform and
// terraform releases its state lock. (Linux sends it when the thread that
// started the child exits; Go only retires threads of goroutines that exit
// while locked to them, which the controller does not do.)
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

// detach starts the runner in a session of its own: no signal sent to the
// controller's process group or terminal reaches it, and no parent-death
// signal is set.
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
}
