package sandbox_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/cgroup"
	"github.com/agentbull/toolruntime/internal/sandbox"
)

// helperSandbox is a sandbox whose homes' commands run in their home's
// helper: with a cgroup per command, as the worker's default is.
func helperSandbox(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	need(t)
	m, err := cgroup.Open(cgroup.Options{Root: "auto"})
	if err != nil {
		t.Skipf("SKIPPING: no cgroup subtree (%v): the helpers are NOT tested on this machine", err)
	}
	s := newSandbox(t, sandbox.Config{Cgroups: m})
	// After the sandbox's Close (cleanups run last first).
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// The commands of one home follow each other in its helper's sandbox,
// each with its own status, output, cgroup and an empty /tmp, and none
// finds a process or a System V IPC object of one before it.
func TestHelperSequentialCommands(t *testing.T) {
	s := helperSandbox(t)
	home := homeDir(t, s)
	ctx := context.Background()
	ns := func() string {
		r := run(t, ctx, s, home, `readlink /proc/self/ns/pid`)
		return strings.TrimSpace(r.out)
	}
	first := ns()
	if second := ns(); second != first || first == "" {
		t.Fatalf("two commands of a home in pid namespaces %q and %q: the helper did not serve the second", first, second)
	}
	if r := run(t, ctx, s, home, "echo a\necho b >&2\nexit 3"); r.code != 3 || r.out != "a\nb\n" {
		t.Errorf("code %d output %q, want 3 and a, b", r.code, r.out)
	}
	if r := run(t, ctx, s, home, `kill -TERM $$`); r.sig != syscall.SIGTERM {
		t.Errorf("signal %v, want SIGTERM", r.sig)
	}
	cg := func() string { return run(t, ctx, s, home, `cat /proc/self/cgroup`).out }
	if a, b := cg(), cg(); a == b {
		t.Errorf("two commands in the same cgroup:\n%s", a)
	}
	if r := run(t, ctx, s, home, `echo x >/tmp/a && mkdir /tmp/.d && echo y >/tmp/.d/b && echo z >/dev/shm/c && echo ok`); r.out != "ok\n" {
		t.Fatalf("writing /tmp: %q", r.out)
	}
	if r := run(t, ctx, s, home, `ls -A /tmp /dev/shm | grep -c -e '^a$' -e '^\.d$' -e '^c$'`); strings.TrimSpace(r.out) != "0" {
		t.Errorf("a command finds what the one before it left in /tmp or /dev/shm: %q", r.out)
	}
	r := run(t, ctx, s, home, `sleep 100 & setsid sleep 101 & echo started`)
	if !r.left || r.out != "started\n" {
		t.Errorf("leftovers %v, output %q: want them reported", r.left, r.out)
	}
	if r := run(t, ctx, s, home, `for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null | tr '\0' ' '; echo; done | grep -c '^sleep 10[01]'`); strings.TrimSpace(r.out) != "0" {
		t.Errorf("a process of an earlier command is still running: %q", r.out)
	}
	if ns() != first {
		t.Error("the helper was not used after leftovers were killed")
	}
	// A System V IPC object outlives its command in the sandbox's IPC
	// namespace: the helper ends, and the next command has a new one.
	if r := run(t, ctx, s, home, `ipcmk -M 4096 >/dev/null && echo made`); r.out != "made\n" {
		t.Skipf("ipcmk: %q", r.out)
	}
	if r := run(t, ctx, s, home, `ipcs -m | grep -c 4096`); strings.TrimSpace(r.out) != "0" {
		t.Errorf("a command finds the shared memory of the one before it: %q", r.out)
	}
	if ns() == first {
		t.Error("the helper served on after a command left a System V IPC object")
	}
}

// A command cut short by its call's end is killed with its helper's
// sandbox; the home's next command runs in a new one.
func TestHelperCancel(t *testing.T) {
	s := helperSandbox(t)
	home := homeDir(t, s)
	first := run(t, context.Background(), s, home, `readlink /proc/self/ns/pid`).out
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	r := run(t, ctx, s, home, `echo up; sleep 100`)
	if r.sig != syscall.SIGKILL || r.out != "up\n" {
		t.Errorf("signal %v, output %q: want SIGKILL after up", r.sig, r.out)
	}
	next := run(t, context.Background(), s, home, `readlink /proc/self/ns/pid`)
	if next.code != 0 || next.out == first {
		t.Errorf("after a cancelled command: code %d, namespace %q (was %q)", next.code, next.out, first)
	}
}

// A command that kills its helper ends its sandbox; it is reported
// killed, and the next command of the home runs.
func TestHelperKilledByItsCommand(t *testing.T) {
	s := helperSandbox(t)
	home := homeDir(t, s)
	run(t, context.Background(), s, home, `true`)
	r := run(t, context.Background(), s, home, `kill -KILL $PPID; sleep 5`)
	if r.sig != syscall.SIGKILL {
		t.Errorf("signal %v: want the command reported killed", r.sig)
	}
	if next := run(t, context.Background(), s, home, `echo ok`); next.out != "ok\n" {
		t.Errorf("the next command: %q", next.out)
	}
}

// A command's own file size limit (the room left in its home's quota)
// holds in a helper's command, and only in it.
func TestHelperFileSize(t *testing.T) {
	s := helperSandbox(t)
	home := homeDir(t, s)
	write := func(limit int64) (int, syscall.Signal) {
		var out strings.Builder
		r, err := s.Start(context.Background(), sandbox.Spec{Home: home, Shell: "/bin/sh", Command: `head -c 200000 /dev/zero >f`,
			Env: []string{"PATH=/usr/bin:/bin"}, FileBytes: limit}, &out, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = r.Wait()
		if _, err := r.End(); err != nil {
			t.Error(err)
		}
		code, sig, _ := r.Status()
		return code, sig
	}
	if code, sig := write(64 << 10); sig != syscall.SIGXFSZ {
		t.Errorf("a 200 kB write under a 64 KiB limit: code %d signal %v, want SIGXFSZ", code, sig)
	}
	if code, sig := write(0); code != 0 || sig != 0 {
		t.Errorf("the next command, without a limit of its own: code %d signal %v", code, sig)
	}
}
