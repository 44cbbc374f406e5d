package server

import "syscall"

// engineProcAttr starts the engine in a process group of its own, so that
// only the runner interrupts it (a terminal's Ctrl-C reaches the runner,
// which then interrupts the engine once), and has the kernel kill it if
// the runner dies.
func engineProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
