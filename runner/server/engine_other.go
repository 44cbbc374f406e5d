//go:build !linux

package server

import "syscall"

// engineProcAttr has nothing to set outside Linux: there an engine
// outlives a runner that crashes.
func engineProcAttr() *syscall.SysProcAttr { return nil }
