//go:build !linux

package durable

import "syscall"

func dieWithTest() *syscall.SysProcAttr { return nil }
