package testenv

import "syscall"

// DieWithParent has the kernel kill a process that a test or harness
// starts when the process that started it dies (a test binary killed by
// go test -timeout, an interrupted bench), so that nothing is left behind.
func DieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
