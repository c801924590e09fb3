//go:build unix

package mcp

import (
	"os/exec"
	"syscall"
)

// detach puts a stdio server in its own process group, so that the
// Ctrl-C meant for the worker does not end the servers while the worker
// lets running calls finish; the worker ends them when it closes.
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
