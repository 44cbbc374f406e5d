package devenv

import "syscall"

// sysProcAttr puts a child in its own process group and has the kernel
// send it SIGTERM when `landform dev` dies (Go retires no thread that
// started a child: no goroutine here locks itself to one).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
