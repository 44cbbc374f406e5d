// Command pause is the Pod sandbox of the single-node cluster (e2e/cluster):
// it holds the Pod's namespaces, reaps the children it inherits as PID 1,
// and exits when told to stop. Kubernetes' own pause image is a C program
// pulled from a registry; neither is available here.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		// Reap every child that exited; one SIGCHLD may stand for many.
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
