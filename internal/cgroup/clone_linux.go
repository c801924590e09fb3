package cgroup

import (
	"os"
	"syscall"
)

// cloneInto has the process start in the cgroup of directory fd
// (clone3 CLONE_INTO_CGROUP).
func cloneInto(a *syscall.SysProcAttr, fd *os.File) {
	a.UseCgroupFD, a.CgroupFD = true, int(fd.Fd())
}
