//go:build !linux

package server

import (
	"context"
	"errors"
)

// killOthers needs Linux's PID namespaces.
func killOthers(context.Context) error {
	return errors.New("only a runner on Linux can end the other processes of its PID namespace")
}
