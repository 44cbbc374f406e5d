//go:build !linux

package runner

import "os/exec"

// setParentDeathSignal has no equivalent outside Linux: there a local runner
// outlives a controller that crashes.
func setParentDeathSignal(*exec.Cmd) {}
