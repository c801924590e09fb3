package sandbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/cgroup"
	"github.com/agentbull/toolruntime/internal/sandbox"
)

// v1Parent makes a cgroup v1 parent for the test's commands beneath the
// test's own memory cgroup, with the same path in the pids and cpu
// hierarchies, and checks at the end that no group is left in it. It
// skips where the host has no writable v1 memory hierarchy.
func v1Parent(t *testing.T, limit int64) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var own string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.SplitN(l, ":", 3); len(f) == 3 && f[1] == "memory" {
			own = f[2]
		}
	}
	mem := filepath.Join("/sys/fs/cgroup/memory", own)
	if own == "" || syscall.Access(mem, 2) != nil {
		t.Skip("SKIPPING: no writable cgroup v1 memory hierarchy; the cgroup limits are NOT tested on this machine")
	}
	rel := filepath.Join(own, fmt.Sprintf("toolruntime-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "_")))
	var dirs []string
	for _, c := range []string{"memory", "pids", "cpu"} {
		d := filepath.Join("/sys/fs/cgroup", c, rel)
		if err := os.MkdirAll(d, 0o755); err != nil {
			if c == "memory" {
				t.Fatal(err)
			}
			continue
		}
		dirs = append(dirs, d)
	}
	if limit > 0 {
		if err := os.WriteFile(filepath.Join(dirs[0], "memory.limit_in_bytes"), []byte(fmt.Sprint(limit)), 0); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, d := range dirs {
			if n := groups(t, d); n != 0 {
				t.Errorf("%d cgroups left in %s", n, d)
			}
			// Whatever a failed test left: kill it and remove it.
			filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
				if err == nil && e.IsDir() && p != d {
					defer os.Remove(p)
				}
				return nil
			})
			if err := os.Remove(d); err != nil {
				t.Error(err)
			}
		}
	})
	return dirs[0]
}

// groups counts the command groups beneath dir.
func groups(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), cgroup.Prefix) {
			n++
		}
	}
	return n
}

// settled counts the command groups beneath dir once their background
// removal had time (up to 30 s) to end.
func settled(t *testing.T, dir string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	n := groups(t, dir)
	for n != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		n = groups(t, dir)
	}
	return n
}

func cgroupSandbox(t *testing.T, root string, l sandbox.Limits) *sandbox.Sandbox {
	t.Helper()
	need(t)
	m, err := cgroup.Open(cgroup.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	// Before v1Parent's check: the groups are removed in the background.
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	return newSandbox(t, sandbox.Config{Cgroups: m, Limits: l})
}

// hog fills the command's /tmp and /dev/shm with 40 MiB each, then holds
// a memfd it grows by 1 MiB at a time up to 200 MiB: none of it is
// address space of a process, all of it is the command's memory.
const hog = `head -c 40m /dev/zero >/tmp/fill && head -c 40m /dev/zero >/dev/shm/fill && echo filled &&
perl -e '$n = "m"; $fd = syscall(319, $n, 0); die "memfd: $!" if $fd < 0; open(F, ">&=", $fd) or die "fd: $!";
$b = "x" x (1 << 20); for (1..200) { print F $b or die "write: $!"; } F->flush; print "held\n"; sleep 30'`

// A command that fills its /tmp and /dev/shm and holds a memfd is killed
// in its own cgroup; another agent's command beside it, and the test
// process (the worker), live and finish.
func TestCgroupMemoryChargedToCommand(t *testing.T) {
	root := v1Parent(t, 0)
	s := cgroupSandbox(t, root, sandbox.Limits{Memory: 128 << 20, TmpBytes: 96 << 20})
	since := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var neighbour result
	wg.Add(1)
	go func() {
		defer wg.Done()
		neighbour = run(t, ctx, s, homeDir(t, s), `head -c 20m /dev/zero >/tmp/x && sleep 2 && echo neighbour-ok`)
	}()
	hostile := run(t, ctx, s, homeDir(t, s), hog)
	wg.Wait()
	if hostile.oomKills < 1 || !strings.Contains(hostile.out, "filled") || strings.Contains(hostile.out, "held") {
		t.Errorf("hostile command: %d OOM kills, output %q: want it killed by its cgroup after filling /tmp and /dev/shm", hostile.oomKills, hostile.out)
	}
	if !strings.Contains(strings.Join(hostile.notes, "\n"), "killed by the sandbox's memory limit") {
		t.Errorf("notes %q lack the memory limit", hostile.notes)
	}
	// memory.failcnt stays 0 on this kernel (6.18) once memsw has a
	// limit: the OOM kill count is what tells.
	t.Logf("hostile: %d OOM kills, memory.failcnt %d", hostile.oomKills, hostile.failcnt)
	if neighbour.code != 0 || !strings.Contains(neighbour.out, "neighbour-ok") || neighbour.oomKills != 0 {
		t.Errorf("neighbour: code %d, %d OOM kills, output %q", neighbour.code, neighbour.oomKills, neighbour.out)
	}
	s.DropSpares()
	if n := settled(t, root); n != 0 {
		t.Errorf("%d cgroups left after the commands ended and the spares", n)
	}
	kernelLog(t, since)
}

// kernelLog shows the kernel's out-of-memory lines and fails if one
// names this process (the worker) as killed.
func kernelLog(t *testing.T, since time.Time) {
	out, err := exec.Command("dmesg", "--since", since.Add(-time.Second).Format("2006-01-02T15:04:05")).CombinedOutput()
	if err != nil {
		t.Logf("dmesg not readable (%v): the kernel log is not checked", err)
		return
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "Killed process") || strings.Contains(l, "out of memory") {
			t.Log("kernel:", l)
			if strings.Contains(l, fmt.Sprintf("Killed process %d ", os.Getpid())) {
				t.Errorf("the kernel killed the worker: %s", l)
			}
		}
	}
}

// The cgroup bounds the processes of a command, whatever user namespace
// they are in, and the command's processes are gone with its cgroup.
func TestCgroupPidsAndCleanup(t *testing.T) {
	root := v1Parent(t, 0)
	if _, err := os.Stat(strings.Replace(root, "/memory/", "/pids/", 1)); err != nil {
		t.Skip("SKIPPING: no cgroup v1 pids hierarchy")
	}
	s := cgroupSandbox(t, root, sandbox.Limits{Pids: 24})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := run(t, ctx, s, homeDir(t, s), `perl -e 'my $n = 0; for (1..60) { my $p = fork; last unless defined $p; if ($p == 0) { sleep 30; exit } $n++ } print "forked $n\n"'`)
	var n int
	if _, err := fmt.Sscanf(r.out, "forked %d", &n); err != nil {
		t.Fatalf("%+v", r)
	}
	if n < 5 || n > 24 {
		t.Errorf("%d processes forked, want fewer than the cgroup's 24: %+v", n, r)
	}
	s.DropSpares()
	if n := settled(t, root); n != 0 {
		t.Errorf("%d cgroups left", n)
	}

	// A command that times out, with processes in its cgroup: all of
	// them are killed and the cgroup removed.
	tctx, tcancel := context.WithTimeout(ctx, 2*time.Second)
	defer tcancel()
	var out strings.Builder
	home := homeDir(t, s)
	run, err := s.Start(tctx, sandbox.Spec{Home: home, Shell: "/bin/sh", Command: `sleep 100 & sleep 100 & echo up; wait`, Env: []string{"PATH=/usr/bin:/bin"}}, &out, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Its own and the spare made for the next command of its home.
	for groups(t, root) != 2 && tctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	_ = run.Wait()
	if _, err := run.End(); err != nil {
		t.Error(err)
	}
	s.DropSpares()
	if n := settled(t, root); n != 0 {
		t.Errorf("%d cgroups left after a timeout", n)
	}
}

// nobodyEnv runs TestCgroupAsNobody's inside part.
const nobodyEnv = "TOOLRUNTIME_TEST_NOBODY"

// The worker as uid 65534 in a 1 GiB memory cgroup chowned to it (as the
// deployment runs it): it finds its own cgroup writable, and a command
// that fills its memory is killed in its own cgroup while the worker and
// a neighbour finish.
func TestCgroupAsNobody(t *testing.T) {
	if os.Getenv(nobodyEnv) != "" {
		nobodyInside(t)
		return
	}
	need(t)
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: making a cgroup for uid 65534 needs root")
	}
	root := v1Parent(t, 1<<30)
	for _, f := range []string{"", "cgroup.procs", "tasks"} {
		if err := os.Chown(filepath.Join(root, f), 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	// The test binary where nobody can run it.
	dir, err := os.MkdirTemp("", "nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "sandbox.test")
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(dst, src)
	src.Close()
	dst.Close()
	homes, tmp := filepath.Join(dir, "homes"), filepath.Join(dir, "tmp")
	for _, d := range []string{homes, tmp} {
		os.Mkdir(d, 0o700)
		os.Chown(d, 65534, 65534)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	since := time.Now()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", `echo $$ >"$1/cgroup.procs" && shift && exec setpriv --reuid=65534 --regid=65534 --clear-groups "$@"`,
		"sh", root, bin, "-test.run=^TestCgroupAsNobody$", "-test.v")
	cmd.Env = []string{nobodyEnv + "=" + homes, "PATH=/usr/bin:/bin", "TMPDIR=" + tmp}
	out, err := cmd.CombinedOutput()
	t.Logf("as nobody:\n%s", out)
	if err != nil {
		t.Fatalf("the inside test failed: %v", err)
	}
	if !strings.Contains(string(out), "inside: ok") {
		t.Fatal("the inside test did not run")
	}
	kernelLog(t, since)
}

func nobodyInside(t *testing.T) {
	if os.Geteuid() != 65534 {
		t.Fatalf("uid %d", os.Geteuid())
	}
	m, err := cgroup.Open(cgroup.Options{Root: "auto"})
	if err != nil {
		t.Fatalf("as nobody in a delegated cgroup: %v", err)
	}
	defer m.Close()
	t.Logf("cgroup v%d %v beneath %s", m.Version(), m.Controllers(), m.Parent())
	s, err := sandbox.New(sandbox.Config{Cgroups: m, Limits: sandbox.Limits{Memory: 128 << 20, TmpBytes: 96 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	homes := os.Getenv(nobodyEnv)
	home := func(name string) string {
		h := filepath.Join(homes, name)
		if err := os.Mkdir(h, 0o700); err != nil {
			t.Fatal(err)
		}
		return h
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var neighbour result
	wg.Add(1)
	go func() {
		defer wg.Done()
		neighbour = run(t, ctx, s, home("b"), `sleep 2; echo neighbour-ok`)
	}()
	hostile := run(t, ctx, s, home("a"), hog)
	wg.Wait()
	b, _ := json.Marshal(map[string]any{"hostile_oom_kills": hostile.oomKills, "hostile_out": hostile.out, "neighbour": neighbour.out})
	t.Logf("%s", b)
	if hostile.oomKills < 1 || neighbour.code != 0 || !strings.Contains(neighbour.out, "neighbour-ok") {
		t.Fatalf("hostile %+v neighbour %+v", hostile, neighbour)
	}
	t.Log("inside: ok")
}
