package server

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// killOthers kills every other process of the runner's PID namespace and
// reaps them: the caller is its process 1, for which kill(-1) reaches
// every process of the namespace but itself, and to which every orphan
// there is reparented. It returns once none is left, or fails when one
// outlives ctx (a process stuck in the kernel).
func killOthers(ctx context.Context) error {
	if err := syscall.Kill(-1, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing the other processes: %w", err)
	}
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.ECHILD):
			return nil
		case errors.Is(err, syscall.EINTR), err == nil && pid > 0:
			continue
		case err != nil:
			return fmt.Errorf("reaping the killed processes: %w", err)
		}
		select {
		case <-ctx.Done():
			return errors.New("a process of the runner's PID namespace did not end after SIGKILL")
		case <-time.After(5 * time.Millisecond):
		}
	}
}
