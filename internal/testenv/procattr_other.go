//go:build !linux

package testenv

import "syscall"

// DieWithParent has no equivalent outside Linux: there a process started
// by a killed test may be left behind.
func DieWithParent() *syscall.SysProcAttr { return nil }
