package cgroup

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// v1Root makes a directory for the test's groups beneath the test's own
// cgroup v1 memory cgroup (and at the same path in pids and cpu), and
// removes it at the end. It skips where there is none to write.
func v1Root(t *testing.T) string {
	t.Helper()
	paths, err := own()
	if err != nil {
		t.Fatal(err)
	}
	mem := filepath.Join("/sys/fs/cgroup/memory", paths["memory"])
	if paths["memory"] == "" || !writable(mem) {
		t.Skip("SKIPPING: no writable cgroup v1 memory hierarchy; group removal is NOT tested on this machine")
	}
	rel := fmt.Sprintf("toolruntime-cgtest-%d-%s", os.Getpid(), t.Name())
	var dirs []string
	for _, c := range []string{"memory", "pids", "cpu"} {
		d := filepath.Join("/sys/fs/cgroup", c, paths[c], rel)
		if err := os.Mkdir(d, 0o755); err != nil {
			if c == "memory" {
				t.Fatal(err)
			}
			continue
		}
		dirs = append(dirs, d)
	}
	t.Cleanup(func() {
		for _, d := range dirs {
			ents, _ := os.ReadDir(d)
			for _, e := range ents {
				if e.IsDir() {
					t.Errorf("left in %s: %s", d, e.Name())
					os.Remove(filepath.Join(d, e.Name()))
				}
			}
			if err := os.Remove(d); err != nil {
				t.Error(err)
			}
		}
	})
	return dirs[0]
}

// Close returns before its group is removed: a group that cannot be
// removed yet (it holds a cgroup of its own, as a slow exit would hold
// it busy) is still there after Close, gone once it can be, and a
// removal that gave up is done by Manager.Close, which waits for every
// removal: after it no group is left.
func TestRemoveInBackground(t *testing.T) {
	root := v1Root(t)
	var logs lockedBuffer
	m, err := Open(Options{Root: root, RemoveWithin: 300 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	busy := func() (*Group, string) {
		g, err := m.New(Limits{MemoryBytes: 32 << 20, Pids: 16})
		if err != nil {
			t.Fatal(err)
		}
		held := filepath.Join(g.Dir(), "held")
		if err := os.Mkdir(held, 0o755); err != nil {
			t.Fatal(err)
		}
		return g, held
	}

	// Freed while the removal still retries: it is removed in the
	// background, and Manager.Close waits for it.
	g1, held1 := busy()
	if err := g1.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(g1.Dir()); err != nil {
		t.Fatalf("Close removed a group that could not be removed yet: %v", err)
	}
	// Held past RemoveWithin: the removal gives up and says so.
	g2, held2 := busy()
	if err := g2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(held1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "not removed yet") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), g2.dirs[0]) {
		t.Fatalf("no log line names the group that was not removed: %q", logs.String())
	}
	if err := os.Remove(held2); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, g := range []*Group{g1, g2} {
		for _, d := range g.dirs {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("%s is left after Manager.Close", d)
			}
		}
	}
	// After Manager.Close, Close removes its group itself.
	g3, err := m.New(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := g3.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(g3.Dir()); err == nil {
		t.Error("a group closed after Manager.Close is left")
	}
}

// Command starts a program in its group: its processes are charged
// there, their oom_score_adj is 1000, and Close kills all of them
// (a background child included) before the group is removed.
func TestCommandJoins(t *testing.T) {
	root := v1Root(t)
	m, err := Open(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	g, err := m.New(Limits{MemoryBytes: 64 << 20, Pids: 16, CPU: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", "sleep 60 & echo $$; cat /proc/self/oom_score_adj; wait")
	g.Command(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _ := out.Read(buf)
	f := strings.Fields(string(buf[:n]))
	for len(f) < 2 {
		m, _ := out.Read(buf[n:])
		n += m
		f = strings.Fields(string(buf[:n]))
	}
	if f[1] != "1000" {
		t.Errorf("oom_score_adj %s, want 1000", f[1])
	}
	for len(pids(filepath.Join(g.Dir(), "cgroup.procs"))) < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	b, _ := os.ReadFile("/proc/" + f[0] + "/cgroup")
	if !strings.Contains(string(b), filepath.Base(g.Dir())) {
		t.Errorf("the program is in %q, not in %s", b, g.Dir())
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Error("the program was not killed")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(g.Dir()); err == nil {
		t.Error("the group is left")
	}
}

// A program that is not found fails to start with exec's error.
func TestCommandNotFound(t *testing.T) {
	cmd := exec.Command("no-such-program-here")
	(*Group)(nil).Command(cmd)
	if err := cmd.Start(); err == nil || !strings.Contains(err.Error(), "no-such-program-here") {
		t.Errorf("start: %v", err)
	}
}

// lockedBuffer is a log written by the removals' goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
