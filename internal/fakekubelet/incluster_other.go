//go:build !linux

package fakekubelet

import (
	"errors"
	"os/exec"
)

var errNoInCluster = errors.New("the fake kubelet gives runner Pods an in-cluster view on Linux only (mount namespaces)")

func inCluster(string, []string, string) (*exec.Cmd, error) { return nil, errNoInCluster }

// CheckInCluster reports whether runner Pods can get an in-cluster view
// (Options.APIServer) on this machine: only on Linux.
func CheckInCluster() error { return errNoInCluster }
