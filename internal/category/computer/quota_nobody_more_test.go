package computer_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/category/computer"
)

// More attacks of round 4's classes, run as uid 65534 by TestQuotaAsNobody
// (each on its own 256 MiB tmpfs, homes of 32 MiB and 5,000 entries, a
// neighbour writing every 20 ms): files no name holds (made with
// O_TMPFILE, unlinked while a background process writes them, mapped
// and deleted), and games with the walk and the events.
func TestQuotaNobodyMoreAttacks(t *testing.T) {
	if os.Getenv(nobodyDisksEnv) == "" {
		t.Skip("run by TestQuotaAsNobody, as uid 65534")
	}
	// As in TestQuotaNobodyAttacks: a quarter of the bytes, a fifth of the
	// entries; three quarters of the bytes for files no name holds, whose
	// growth no walk sees (as uid 65534 under -race at load 11 to 17: 0.1
	// to 16 MiB past, mostly about 1, 18 once beside a whole suite's run;
	// the file system alone, without the tree's descriptors read, 14 to
	// 32 MiB for files deleted and held open, and the disk filled, 213
	// MiB past, for O_TMPFILE and mapped files). Preallocation:
	// TestQuotaNobodyFallocate.
	const (
		pastBytes = nobodyBytes / 4
		pastHeld  = nobodyBytes * 3 / 4
		pastFiles = nobodyFiles / 5
	)
	for _, a := range []struct {
		name, command string
		bytes, files  int64
	}{
		{"O_TMPFILE files", `python3 -c '
import os, time
held = []
for i in range(60):
    fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o600)
    for j in range(4):
        os.write(fd, b"x" * (1 << 20))
    held.append(fd)
time.sleep(3)
'`, pastHeld, pastFiles},
		{"unlinked while background writers write", `i=0; while [ $i -lt 8 ]; do python3 -c '
import sys
f = open(sys.argv[1], "wb")
while True:
    f.write(b"x" * (1 << 20))
    f.flush()
' w$i & i=$((i+1)); done; sleep 0.3; rm -f w*; wait`, pastHeld, pastFiles},
		{"mapped and deleted", `python3 -c '
import mmap, os, time
maps = []
for i in range(60):
    f = open("m%d" % i, "w+b")
    f.truncate(4 << 20)
    m = mmap.mmap(f.fileno(), 4 << 20)
    os.unlink("m%d" % i)
    f.close()
    for off in range(0, 4 << 20, 4096):
        m[off] = 1
    maps.append(m)
time.sleep(3)
'`, pastHeld, pastFiles},
		{"punched and refilled", `python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open("p", os.O_CREAT | os.O_RDWR, 0o600)
for i in range(200):
    os.posix_fallocate(fd, 0, 24 << 20)
    libc.fallocate(fd, 3, 0, 24 << 20)  # punch the hole back
    os.pwrite(fd, b"x" * (1 << 20), (i % 24) << 20)
    other = os.open("q%d" % i, os.O_CREAT | os.O_WRONLY, 0o600)
    os.posix_fallocate(other, 0, 1 << 20)
    os.close(other)
'`, pastBytes, pastFiles},
		{"hard links across directories, original deleted", `head -c 4194304 /dev/zero > f; python3 -c '
import os
for i in range(40):
    os.mkdir("d%d" % i)
    os.link("f", "d%d/l" % i)
'; rm f; i=0; while [ $i -lt 40 ]; do head -c 1048576 /dev/zero > d$i/g; i=$((i+1)); done`, pastBytes, pastFiles},
		{"symlink loops beside a writer", `python3 -c '
import os
for i in range(200):
    os.mkdir("l%d" % i)
    os.symlink("../l%d" % i, "l%d/self" % i)
    os.symlink(".", "l%d/dot" % i)
    os.symlink("/", "l%d/root" % i)
'; i=0; while [ $i -lt 100 ]; do head -c 1048576 /dev/zero > l$((i%200))/f$i; i=$((i+1)); done`, pastBytes, pastFiles},
		{"FIFO and socket storm", `python3 -c '
import os, socket
i = 0
while True:
    os.mkfifo("p%d" % i)
    s = socket.socket(socket.AF_UNIX)
    s.bind("s%d" % i)
    s.close()
    i += 1
'`, pastBytes, pastFiles},
		{"directory renamed away while written", `mkdir a; i=0; while [ $i -lt 100 ]; do head -c 1048576 /dev/zero > a/f$i; mv a b$i; mkdir a; mv b$i/f$i a/ 2>/dev/null; mv b$i a/b$i; i=$((i+1)); done`, pastBytes, pastFiles},
	} {
		t.Run(strings.ReplaceAll(a.name, " ", "_"), func(t *testing.T) {
			nobodyAttack(t, a.name, a.command, a.bytes, a.files)
		})
	}
}

// A writer that setsid'd and double-forked before its command ended
// writes nothing after: the command's end ends every process it started.
func TestQuotaNobodyNothingOutlivesItsCommand(t *testing.T) {
	if os.Getenv(nobodyDisksEnv) == "" {
		t.Skip("run by TestQuotaAsNobody, as uid 65534")
	}
	c := nobodyAttack(t, "setsid and a double fork", `(setsid sh -c 'sleep 0.2; while :; do head -c 65536 /dev/zero >> late; done' &) ; sh -c '(sh -c "sleep 0.2; while :; do head -c 65536 /dev/zero >> later; done" &)'; sleep 0.3; echo ended`, nobodyNever, nobodyNever)
	end, err := c.Usage(agent)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	u, err := c.Usage(agent)
	if err != nil {
		t.Fatal(err)
	}
	if u.Bytes > end.Bytes || u.Files > end.Files {
		t.Errorf("the home grew from %d KiB and %d entries to %d KiB and %d entries in the second after its command ended: something it started outlived it", end.Bytes>>10, end.Files, u.Bytes>>10, u.Files)
	}
}

// A home already over its bound when a command starts: the command is
// stopped at its first growth, however fast it writes, and write_file
// is refused.
func TestQuotaNobodyOverAtStart(t *testing.T) {
	if os.Getenv(nobodyDisksEnv) == "" {
		t.Skip("run by TestQuotaAsNobody, as uid 65534")
	}
	for _, a := range []struct{ name, fill, command string }{
		// The writers go on after a refused write: Python ignores
		// SIGXFSZ, so a write past the file size cap fails (EFBIG), and
		// a writer that let that end it would end by itself at the cap,
		// sometimes before the follower's stop (a race, not a test of
		// the stop).
		{"bytes", "big", `python3 -c '
import os
fd = os.open("g", os.O_CREAT | os.O_WRONLY, 0o600)
while True:
    try:
        os.write(fd, b"x" * (1 << 20))
    except OSError:
        pass
'`},
		{"entries", "many", `i=0; while [ $i -lt 100000 ]; do : > e$i; i=$((i+1)); done`},
		{"held open", "big", `python3 -c '
import os
fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o600)
while True:
    try:
        os.write(fd, b"x" * (1 << 20))
    except OSError:
        pass
'`},
	} {
		t.Run(a.name, func(t *testing.T) {
			disk := nobodyDisk(t)
			c := newCategory(t, computer.Config{Root: filepath.Join(disk, "homes"), HomeQuotaBytes: nobodyBytes, HomeQuotaFiles: nobodyFiles})
			dir := home(t, c, agent)
			home(t, c, "a2")
			// Past its bound from before (a smaller bound set since, or
			// files an operator put there).
			switch a.fill {
			case "big":
				if err := os.WriteFile(filepath.Join(dir, "old"), make([]byte, nobodyBytes+(1<<20)), 0o600); err != nil {
					t.Fatal(err)
				}
			case "many":
				for i := range nobodyFiles + 10 {
					if err := os.WriteFile(filepath.Join(dir, "o"+strconv.Itoa(i)), nil, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			before, _ := c.Usage(agent)
			stopN := neighbour(t, c)
			stopP := peak(disk)
			_, err := run(t, c, computer.RunCommandName, map[string]any{"command": a.command, "timeout_seconds": 60})
			pb, pf := stopP()
			nerr := stopN()
			t.Logf("ATTACK over at start (%s): grew the disk by %d KiB and %d inodes at its peak; stopped: %v; neighbour: %v", a.name, pb>>10, pf, err, nerr)
			if err == nil || !strings.Contains(err.Error(), "disk quota") {
				t.Errorf("not stopped for the quota: %v", err)
			}
			if nerr != nil {
				t.Errorf("the neighbour noticed: %v", nerr)
			}
			// At once: a fraction of the slack the attacks from an empty
			// home get (a quarter). A shell that makes empty files gets
			// 170 to 270 made before the stop under -race with the whole
			// suite beside it, and up to 770 on a host at load 8 to 20
			// (the follower is run late); without the start's pacing it
			// is never stopped (tens of thousands).
			if pb > nobodyBytes/8 || pf > nobodyFiles/5 {
				t.Errorf("a home over its bound at the start grew the disk by %d KiB and %d inodes", pb>>10, pf)
			}
			if _, werr := run(t, c, computer.WriteFileName, map[string]any{"path": "small", "content": "hello"}); werr == nil {
				t.Errorf("write_file accepted in a home over its bound (%d KiB, %d entries)", before.Bytes>>10, before.Files)
			}
		})
	}
}

// A command of a worker without a cgroup cannot set its session group's
// nice back (any user may, on its own processes, through
// /proc/self/autogroup): the follower lowers it near a bound so that
// the worker watching it is run first, and a writer at nice 0 again ran
// tens of MiB past its home while the worker waited for a core. /proc
// is read-only in its sandbox; its oom_score_adj, set from outside, is
// 1000 as before. Run as uid 65534 by TestQuotaAsNobody.
func TestQuotaNobodyGroupNiceKept(t *testing.T) {
	if os.Getenv(nobodyDisksEnv) == "" {
		t.Skip("run by TestQuotaAsNobody, as uid 65534")
	}
	c := newCategory(t, computer.Config{Root: filepath.Join(nobodyDisk(t), "homes"), HomeQuotaBytes: nobodyBytes, HomeQuotaFiles: nobodyFiles})
	home(t, c, agent)
	res, err := run(t, c, computer.RunCommandName, map[string]any{"command": `for f in autogroup comm; do
  if (echo 0 >/proc/self/$f) 2>/dev/null; then echo "$f written"; else echo "$f refused"; fi
done
echo "oom $(cat /proc/self/oom_score_adj)"
test -r /proc/self/status && echo "status read"`})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"autogroup refused", "comm refused", "oom 1000", "status read"} {
		if !strings.Contains(res.Content, want) {
			t.Errorf("the command's output lacks %q:\n%s", want, res.Content)
		}
	}
}
