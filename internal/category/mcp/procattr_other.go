//go:build !unix

package mcp

import "os/exec"

func detach(*exec.Cmd) {}
