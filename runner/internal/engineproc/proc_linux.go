package engineproc

import (
	"os"
	"os/signal"
	"syscall"
)

// procAttr starts the engine in a process group of its own, as
// terraform-exec starts this process: a signal to this process's group
// does not reach the engine besides the one forwarded to it (a second
// SIGINT makes terraform stop at once, without writing the state). The
// kernel kills the engine when this process dies, which it does when the
// runner dies (terraform-exec sets its parent-death signal) or when
// terraform-exec kills it after the interrupt grace.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// exitStatus is the engine's exit status; an engine killed by a signal
// kills this process with the same signal, so that terraform-exec sees
// what the engine did.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		signal.Reset(ws.Signal())
		_ = syscall.Kill(os.Getpid(), ws.Signal())
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
