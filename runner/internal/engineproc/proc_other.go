//go:build !linux

package engineproc

import (
	"os"
	"syscall"
)

// procAttr has nothing to set outside Linux: there an engine outlives a
// runner that crashes.
func procAttr() *syscall.SysProcAttr { return nil }

func exitStatus(ps *os.ProcessState) int {
	if code := ps.ExitCode(); code >= 0 {
		return code
	}
	return 1
}
