package durable

import "syscall"

// dieWithTest: a controller the test started dies with the test process,
// even when the test binary is killed (go test -timeout).
func dieWithTest() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
