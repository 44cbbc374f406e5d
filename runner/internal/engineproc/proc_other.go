//go:build !linux

package engineproc

import "syscall"

// redirect opens path for writing as file descriptor fd.
func redirect(fd int, path string) error {
	f, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	if err := syscall.Dup2(f, fd); err != nil {
		return err
	}
	return syscall.Close(f)
}
