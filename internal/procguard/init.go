package procguard

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// forwarded are the signals the init passes on to the program: those a
// container runtime or an operator sends to stop, reload or dump it.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// Init returns at once unless the process is PID 1. As PID 1 it never
// returns: it runs the program again as its child, forwards signals to it,
// reaps every process that becomes its child, and exits with the child's
// status (128+n when signal n ended it). The init then forgets the named
// variables and is non-dumpable, like the program after Harden.
func Init(forget ...string) {
	if os.Getpid() != 1 {
		return
	}
	os.Exit(runInit(forget))
}

func runInit(forget []string) int {
	// Before the child exists, so that no signal meant for it is lost.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	// /proc/self/exe, not os.Args[0]: the very binary, even when PATH or
	// the file changed; os.Args[0] only without /proc. Its own process
	// group, so that a terminal's ^C reaches it once, through the init,
	// not twice.
	attr := &os.ProcAttr{
		Env:   os.Environ(),
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
	child, err := os.StartProcess("/proc/self/exe", os.Args, attr)
	if errors.Is(err, fs.ErrNotExist) {
		if path, lerr := exec.LookPath(os.Args[0]); lerr == nil {
			child, err = os.StartProcess(path, os.Args, attr)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "init: starting %s: %v\n", os.Args[0], err)
		return 1
	}
	if err := Harden(forget...); err != nil {
		fmt.Fprintf(os.Stderr, "init: %v\n", err)
	}
	go func() {
		for s := range sigs {
			_ = child.Signal(s)
		}
	}()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			// ECHILD while the child is not reaped cannot happen; should
			// it, there is nothing left to wait for.
			fmt.Fprintf(os.Stderr, "init: wait4: %v\n", err)
			return 1
		case pid == child.Pid:
			return exitCode(ws)
		}
	}
}

// exitCode is the status a shell would report for ws.
func exitCode(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
