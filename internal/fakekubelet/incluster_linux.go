package fakekubelet

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// A runner Pod with an in-cluster view runs in a mount namespace of its
// own, where its ServiceAccount directory is mounted at ServiceAccountDir,
// and in a PID namespace of its own, where the runner is process 1 as in
// its container: when it dies, the kernel kills everything it started
// (terraform, which the runner starts in a process group of its own,
// and the provisioners terraform runs), as a container runtime does.
// Go cannot run code between fork and exec, so the kubelet starts its own
// binary (the test binary, which imports this package) in new namespaces;
// this package's init notices the variables below, mounts, and executes
// the runner in place (same process).
const (
	execEnv           = "LANDFORM_FAKEKUBELET_EXEC"
	serviceAccountEnv = "LANDFORM_FAKEKUBELET_SERVICEACCOUNT"
	// probe is an execEnv value: mount, then exit 0.
	probe = "-probe-"
)

func init() {
	bin, ok := os.LookupEnv(execEnv)
	if !ok {
		return
	}
	src := os.Getenv(serviceAccountEnv)
	_ = os.Unsetenv(execEnv)
	_ = os.Unsetenv(serviceAccountEnv)
	if err := mountServiceAccount(src); err != nil {
		fmt.Fprintf(os.Stderr, "fakekubelet: mounting the service account at %s: %v\n", ServiceAccountDir, err)
		os.Exit(126)
	}
	if bin == probe {
		os.Exit(0)
	}
	err := syscall.Exec(bin, os.Args, os.Environ())
	fmt.Fprintf(os.Stderr, "fakekubelet: executing %s: %v\n", bin, err)
	os.Exit(127)
}

// mountServiceAccount mounts src at ServiceAccountDir in this process's
// (new) mount namespace. Where the host has no such directory, the
// nearest existing parent (usually /var/run) is covered with an empty
// tmpfs first, so nothing is created on the host: the runner sees only
// its service account there.
func mountServiceAccount(src string) error {
	// Nothing mounted here may propagate to the host.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the mounts private: %w", err)
	}
	if _, err := os.Stat(ServiceAccountDir); err != nil {
		parent := filepath.Dir(ServiceAccountDir)
		for {
			if _, err := os.Stat(parent); err == nil || parent == "/" {
				break
			}
			parent = filepath.Dir(parent)
		}
		if parent == "/" {
			return errors.New("no parent directory to mount a tmpfs on")
		}
		if err := syscall.Mount("tmpfs", parent, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755"); err != nil {
			return fmt.Errorf("tmpfs on %s: %w", parent, err)
		}
		if err := os.MkdirAll(ServiceAccountDir, 0o755); err != nil {
			return err
		}
	}
	if err := syscall.Mount(src, ServiceAccountDir, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("binding %s: %w", src, err)
	}
	return nil
}

// inCluster returns the command that runs bin with args in mount and PID
// namespaces of its own, with the directory sa at ServiceAccountDir. As
// root that is all; otherwise a user namespace (mapping the user to root
// in it) holds them.
func inCluster(bin string, args []string, sa string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{Path: self, Args: append([]string{bin}, args...)}
	cmd.Env = []string{execEnv + "=" + bin, serviceAccountEnv + "=" + sa}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID}
	if uid, gid := os.Getuid(), os.Getgid(); uid != 0 {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}}
	}
	return cmd, nil
}

// CheckInCluster reports whether runner Pods can get an in-cluster view
// (Options.APIServer) on this machine: that needs mount and PID namespaces
// (root, or unprivileged user namespaces) and the test binary to import
// this package. The error says why not.
func CheckInCluster() error {
	dir, err := os.MkdirTemp("", "fakekubelet-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cmd, err := inCluster(probe, nil, dir)
	if err != nil {
		return err
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("a process in mount and PID namespaces of its own cannot mount %s (%v): %s", ServiceAccountDir, err, out)
	}
	return nil
}
