//go:build !linux

package devenv

import "syscall"

// sysProcAttr puts a child in its own process group. Outside Linux there
// is no parent-death signal: a killed `landform dev` leaves its children
// running (the next start reports their ports in use).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
