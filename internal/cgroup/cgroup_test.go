package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The v2 path as far as a host whose cgroup v2 hierarchy has no
// controllers allows (this development machine: cgroup v1 for memory and
// pids, a v2 hierarchy at /sys/fs/cgroup/unified with none): the worker
// moves to its leaf, a command is cloned into its own cgroup
// (CLONE_INTO_CGROUP), cgroup.kill ends all of it, the cgroup is
// removed, and a dead worker's groups are swept. The limits themselves
// are not set here (no memory, pids or cpu controller to enable).
func TestV2Delegation(t *testing.T) {
	ms, err := mounts()
	if err != nil {
		t.Fatal(err)
	}
	paths, err := own()
	if err != nil {
		t.Fatal(err)
	}
	var base string
	for _, m := range ms {
		if m.v2 {
			base = dirOf(m, paths[""])
		}
	}
	if base == "" || !writable(base) {
		t.Skip("SKIPPING: no writable cgroup v2 hierarchy; the v2 path is NOT tested on this machine")
	}
	dir := filepath.Join(base, fmt.Sprintf("toolruntime-v2test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, Prefix+"999999999-1")
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	// The test process stands for the worker: it is in the delegated
	// cgroup, and Open moves it to the leaf.
	if err := writeFile(filepath.Join(dir, "cgroup.procs"), fmt.Sprint(os.Getpid())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := writeFile(filepath.Join(base, "cgroup.procs"), fmt.Sprint(os.Getpid())); err != nil {
			t.Error(err)
		}
		os.Remove(filepath.Join(dir, "worker"))
		if err := os.Remove(dir); err != nil {
			t.Error(err)
		}
	})
	m, err := Open(Options{Root: dir, anyControllers: true})
	if err != nil {
		t.Fatal(err)
	}
	if m.Version() != 2 || m.Parent() != dir {
		t.Fatalf("v%d beneath %s", m.Version(), m.Parent())
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("a dead worker's group was not swept")
	}
	if got := pids(filepath.Join(dir, "worker", "cgroup.procs")); len(got) != 1 || got[0] != os.Getpid() {
		t.Errorf("the worker's leaf holds %v, want the worker (%d)", got, os.Getpid())
	}
	g, err := m.New(Limits{MemoryBytes: 64 << 20, Pids: 32, CPU: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", "sleep 60 & sleep 60 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(g.FD().Fd())}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid))
	if !strings.Contains(string(b), "0::"+strings.TrimPrefix(g.Dir(), base)) {
		t.Errorf("the command is in %q, not in %s", b, g.Dir())
	}
	for len(pids(filepath.Join(g.Dir(), "cgroup.procs"))) < 3 {
		time.Sleep(10 * time.Millisecond)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the command ended with %v, want SIGKILL", err)
	}
	// Removed in the background; the Manager's Close waits for it.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(g.Dir()); err == nil {
		t.Error("the group was not removed")
	}
}

func TestMountinfoPaths(t *testing.T) {
	m := mount{root: "/kubepods/pod1", point: "/sys/fs/cgroup"}
	for p, want := range map[string]string{"/kubepods/pod1": "/sys/fs/cgroup", "/kubepods/pod1/c": "/sys/fs/cgroup/c", "/other": ""} {
		if got := dirOf(m, p); got != want {
			t.Errorf("dirOf(%s) = %q, want %q", p, got, want)
		}
	}
}
