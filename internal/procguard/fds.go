package procguard

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// CloseOnExec marks every descriptor above 2 close-on-exec, so that no
// child (a sandboxed command, an MCP server, the init's program) inherits
// one the worker's parent left open: a supervisor's socket, a wrapper
// script's file. What a child is meant to get it gets explicitly
// (os/exec's Stdin, Stdout, Stderr and ExtraFiles are dup'ed onto the
// child's 0, 1, 2, 3… after the fork), so nothing is lost.
//
// It may run at any time: Go opens every descriptor of its own with
// O_CLOEXEC, so the only ones it changes are inherited ones. It uses
// close_range(2) with CLOSE_RANGE_CLOEXEC (Linux 5.11), and on older
// kernels sets FD_CLOEXEC on each descriptor /proc/self/fd lists.
func CloseOnExec() error {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	return closeOnExecProc()
}

// closeOnExecProc is CloseOnExec without close_range(2).
func closeOnExecProc() error {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("procguard: listing descriptors: %w", err)
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		// The directory's own descriptor is listed too, and is gone by
		// now: EBADF is no error here.
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC); err != nil {
			return fmt.Errorf("procguard: marking descriptor %d close-on-exec: %w", fd, err)
		}
	}
	return nil
}
