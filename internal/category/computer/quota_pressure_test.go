package computer

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// sessionTree starts a shell in a session of its own (as bubblewrap's
// --new-session starts a command) with a sleep below it, and returns the
// tree of the shell and the sleep's pid.
func sessionTree(t *testing.T) (*procTree, int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 60 & echo $!; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	line := make([]byte, 32)
	n, _ := out.Read(line)
	child, err := strconv.Atoi(string(bytes.TrimSpace(line[:n])))
	if err != nil {
		t.Fatalf("the shell did not say its child's pid: %q", line[:n])
	}
	tree := newProcTree(cmd.Process.Pid)
	t.Cleanup(tree.close)
	return tree, child
}

// needAutogroups skips a test where the kernel groups no sessions
// (sched_autogroup_enabled): there is no group's nice to lower.
func needAutogroups(t *testing.T) {
	t.Helper()
	if b, err := os.ReadFile("/proc/sys/kernel/sched_autogroup_enabled"); err != nil || string(bytes.TrimSpace(b)) != "1" {
		t.Skip("SKIPPING: the kernel groups no sessions here (sched_autogroup_enabled): nothing to lower")
	}
}

// groupNice is the nice of pid's scheduler group (autogroup), or "" where
// the kernel groups no sessions.
func groupNice(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/autogroup")
	if err != nil {
		return ""
	}
	_, nice, _ := bytes.Cut(bytes.TrimSpace(b), []byte(" nice "))
	return string(nice)
}

// A command near a bound gets its session's scheduler group at nice 19:
// bubblewrap's --new-session gives every command a group of its own,
// where SCHED_IDLE alone ranks its processes only among themselves, and
// the command went on at a full group's share while the follower waited
// for a core (thousands of entries and tens of MiB past the bound at
// load 7 to 11). A paced command further from its bounds gets nice 5
// (at nice 0, eight writers left the worker unrun for up to 37 ms and
// ran 68 MiB past a home of 32; at nice 19, a paced writer of 1 MiB
// files beside two busy loops ran into its 2-minute limit); one stopped
// for a walk alone keeps its group's share (SCHED_IDLE within it). A
// command that sets its group's nice back is set again at the next
// stop.
func TestTreeGroupLowered(t *testing.T) {
	needAutogroups(t)
	if os.Geteuid() != 0 {
		// Without CAP_SYS_ADMIN the kernel takes one write of a group's
		// nice a tenth of a second across the host (EAGAIN), and these
		// cases write several in a row.
		t.Skip("SKIPPING: not root: the cases write groups' nices faster than the kernel lets a user")
	}
	for _, c := range []struct {
		name string
		do   func(*procTree)
		want string
	}{
		{"paced", func(p *procTree) { _ = p.pace(0.5); _ = p.pace(0) }, "5"},
		{"near a bound", func(p *procTree) { p.lower() }, "19"},
		{"paced, then near a bound", func(p *procTree) { _ = p.pace(0.1); p.lower(); _ = p.pace(0.5) }, "19"},
		{"set back by the command, then stopped", func(p *procTree) {
			_ = p.pace(0.1)
			setBack(t, p.root)
			p.freeze()
			p.thaw()
		}, "5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tree, child := sessionTree(t)
			if n := groupNice(t, child); n != "0" {
				t.Skipf("SKIPPING: a new session's group starts at nice %q here", n)
			}
			tree.freeze() // SCHED_IDLE: the group is left as it was
			tree.thaw()
			if n := groupNice(t, child); n != "0" {
				t.Errorf("a freeze alone set the group's nice to %s", n)
			}
			c.do(tree)
			if n := groupNice(t, child); n != c.want {
				t.Errorf("the command's group is at nice %s, want %s", n, c.want)
			}
			if n := groupNice(t, os.Getpid()); n == "19" {
				t.Error("the worker's own group was lowered")
			}
		})
	}
}

// A walk that finds the command ran a burst of events ahead of it
// (burstRead queued), or the file system grew past the home's room where
// no event tells, stops the command for the rest of the walk; after a
// walk that finds the home under its line, the command goes on.
func TestWalkPressureHoldsTheCommand(t *testing.T) {
	for _, c := range []struct {
		name  string
		bytes int64
		grow  func(t *testing.T, home, beside string)
	}{
		{"events", 1 << 30, func(t *testing.T, home, _ string) {
			for i := range 800 {
				if err := os.WriteFile(filepath.Join(home, "f"+strconv.Itoa(1000+i)), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"the file system", 4 << 20, func(t *testing.T, _, beside string) {
			// Beside the home, on its file system: no event of the home's
			// tells it.
			if err := os.WriteFile(filepath.Join(beside, "big"), bytes.Repeat([]byte{1}, 8<<20), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			w := followed(t, root, c.bytes, 100_000)
			if w.f == nil {
				t.Skip("SKIPPING: no inotify instance to be had here")
			}
			tree, child := sessionTree(t)
			w.setTree(tree)
			w.walk(false)
			if w.pressure(); w.pressed && c.bytes >= 1<<30 {
				// (Only where the room is 7/8 GiB: others' writes to a
				// shared disk could pass a few MiB of room meanwhile.)
				t.Fatal("a walk with nothing queued and no growth stopped the command")
			}
			c.grow(t, w.h.dir, root)
			w.pressure()
			if !w.pressed {
				t.Fatal("the command ran ahead of the walk and was not stopped")
			}
			// (A process stopped while it waited for a core, SCHED_IDLE,
			// shows as running until it takes the signal, before any
			// instruction of its own.)
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if st, _ := statOf(child); st == 'T' || st == 't' {
					break
				}
				if time.Now().After(deadline) {
					st, _ := statOf(child)
					t.Fatalf("the command's process is in state %q, want stopped", st)
				}
			}
			w.walk(false)
			if w.pressed {
				t.Error("still pressed after the walk")
			}
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if st, _ := statOf(child); st != 'T' && st != 't' {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the command was left stopped after a walk that found its home under its line")
				}
			}
		})
	}
}

// followed opens home "a" in a homes directory under root with the given
// bounds and follows it, as a command's start would; the test's cleanup
// closes them.
func followed(t *testing.T, root string, bytes, files int64) *follower {
	t.Helper()
	hs, err := openHomes(filepath.Join(root, "homes"), slog.New(slog.DiscardHandler), nil, newQuotas(bytes, files))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hs.close() })
	h, err := hs.open("a")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.close)
	w := hs.quota.follow(h)
	t.Cleanup(w.close)
	return w
}

// setBack sets the nice of pid's session group back to 0, as any command
// may (its own group, to 0 or above), and waits out the kernel's tenth of
// a second between two such writes by one who is not CAP_SYS_ADMIN, so
// that the worker's next write is not refused for it.
func setBack(t *testing.T, pid int) {
	t.Helper()
	path := "/proc/" + strconv.Itoa(pid) + "/autogroup"
	for range 20 {
		err := os.WriteFile(path, []byte("0"), 0)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EAGAIN) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := groupNice(t, pid); n != "0" {
		t.Fatalf("the group's nice is %s after it was set back to 0", n)
	}
	time.Sleep(110 * time.Millisecond)
}

// Processes that each setsid'd into a session of their own get groups
// at nice 0; as uid 65534 the kernel takes one write of a group's nice a
// tenth of a second, so the worker lowers one such group at a time. A
// process whose group is not yet lowered stays stopped when the tree is
// continued, until it is: eight writers, each in a session of its own,
// ran up to 26 MiB past a home of 32 as the worker's equals. Run as uid
// 65534 by TestQuotaAsNobody (as root there is no interval to wait).
func TestQuotaNobodyNewSessionsHeldUntilLowered(t *testing.T) {
	if os.Getenv("TOOLRUNTIME_TEST_NOBODY_DISKS") == "" {
		t.Skip("run by TestQuotaAsNobody, as uid 65534")
	}
	needAutogroups(t)
	cmd := exec.Command("sh", "-c", "setsid sleep 60 & setsid sleep 60 & setsid sleep 60 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		for pid := range newProcTree(cmd.Process.Pid).members() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = cmd.Wait()
	})
	tree := newProcTree(cmd.Process.Pid)
	t.Cleanup(tree.close)
	var sleeps []int
	for deadline := time.Now().Add(5 * time.Second); len(sleeps) < 3 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		sleeps = sleeps[:0]
		for pid := range tree.members() {
			if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); string(bytes.TrimSpace(b)) == "sleep" {
				sleeps = append(sleeps, pid)
			}
		}
	}
	if len(sleeps) != 3 {
		t.Fatalf("found %d sleeps in sessions of their own, want 3", len(sleeps))
	}
	tree.mu.Lock()
	tree.groupNice = pacedNice
	tree.mu.Unlock()
	tree.freeze() // lowers what the kernel lets it: one group a tenth of a second
	tree.thaw()
	running := 0
	for _, pid := range sleeps {
		st, _ := statOf(pid)
		n := groupNice(t, pid)
		if n == "0" && st != 'T' && st != 't' {
			t.Errorf("sleep %d runs (state %c) with its group at nice 0", pid, st)
		}
		if st != 'T' && st != 't' {
			running++
		}
	}
	if running == 3 {
		lowered := 0
		for _, pid := range sleeps {
			if groupNice(t, pid) == "5" {
				lowered++
			}
		}
		if lowered == 3 {
			t.Error("all three groups were lowered at once: the kernel's interval did not apply here, the test proves nothing")
		}
	}
	// Each is continued once its group is lowered, a tenth of a second
	// or so apart.
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range sleeps {
		for {
			st, _ := statOf(pid)
			if n := groupNice(t, pid); n == "5" && st != 'T' && st != 't' {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sleep %d is in state %c with its group at nice %s after 5 s, want running at nice 5", pid, st, groupNice(t, pid))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
