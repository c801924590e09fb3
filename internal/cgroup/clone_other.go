//go:build !linux

package cgroup

import (
	"os"
	"syscall"
)

// cloneInto is a no-op: cgroups are Linux's (Open finds none elsewhere).
func cloneInto(*syscall.SysProcAttr, *os.File) {}
