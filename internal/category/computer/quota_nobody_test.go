package computer_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/tool"
)

// nobodyDisksEnv, set, names a directory of tmpfs mounts (d0, d1, …) a
// root test made for an inner run of this binary as uid 65534, which
// cannot mount: smallFS and fastRoot hand them out in turn.
const nobodyDisksEnv = "TOOLRUNTIME_TEST_NOBODY_DISKS"

// nobodyDisks is how many tmpfs mounts the outer run makes.
const nobodyDisks = 40

var nobodyNext atomic.Int32

// nobodyDisk is the next tmpfs the outer run made, or "" outside an inner
// run.
func nobodyDisk(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(nobodyDisksEnv)
	if dir == "" {
		return ""
	}
	n := nobodyNext.Add(1) - 1
	if n >= nobodyDisks {
		t.Fatalf("the inner run used more than %d disks", nobodyDisks)
	}
	return filepath.Join(dir, "d"+strconv.Itoa(int(n)))
}

// TestQuotaAsNobody runs the round-4 home quota attacks and R3-32 with
// the worker's side (this test binary) as uid 65534, as the image runs
// it: no cgroup of its own (cgroup v1 here is root's), no loop mounts,
// so the estimate mode runs without a cgroup to pace a command. Homes
// are on a 256 MiB tmpfs, 32 MiB and 5,000 entries each, a neighbour
// writing throughout.
func TestQuotaAsNobody(t *testing.T) {
	needSandbox(t)
	if os.Getenv(nobodyDisksEnv) != "" {
		t.Skip("the inner run")
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: the attacks as uid 65534 need root to mount their tmpfs and drop to 65534")
	}
	// Beside nothing of root's: t.TempDir's parents are closed to others.
	base, err := os.MkdirTemp("", "nobody")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "computer.test")
	copyFile(t, self, bin)
	disks := filepath.Join(base, "disks")
	if err := os.Mkdir(disks, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range nobodyDisks {
		d := filepath.Join(disks, "d"+strconv.Itoa(i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", d, "tmpfs", 0, "size=256m,mode=0700,uid=65534,gid=65534"); err != nil {
			t.Skipf("SKIPPING: a tmpfs cannot be mounted here (%v)", err)
		}
		t.Cleanup(func() { _ = syscall.Unmount(d, syscall.MNT_DETACH) })
	}
	tmp := filepath.Join(base, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmp, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^(TestQuotaNobody.*|TestReserveKeepsSharedStoreWritable)$", "-test.v", "-test.count=1", "-test.timeout=20m")
	cmd.Env = append(os.Environ(), nobodyDisksEnv+"="+disks, "HOME="+tmp, "TMPDIR="+tmp)
	cmd.Dir = base
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	t.Logf("as uid 65534:\n%s", out)
	if err != nil || strings.Contains(string(out), "--- SKIP: TestQuotaNobody") || !strings.Contains(string(out), "--- PASS: TestQuotaNobodyAttacks") {
		t.Fatalf("the attacks as uid 65534: %v", err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// The round-4 bounds.
const (
	nobodyBytes = 32 << 20
	nobodyFiles = 5000
)

// peak samples dir's file system every 2 ms until stop: the most bytes
// and inodes it held above what it held at the start.
func peak(dir string) (stop func() (bytes, files int64)) {
	used := func() (int64, int64) {
		var st syscall.Statfs_t
		if syscall.Statfs(dir, &st) != nil {
			return 0, 0
		}
		return int64(st.Blocks-st.Bfree) * st.Bsize, int64(st.Files - st.Ffree)
	}
	b0, f0 := used()
	var mb, mf int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			b, f := used()
			mb, mf = max(mb, b-b0), max(mf, f-f0)
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	})
	return func() (int64, int64) {
		close(done)
		wg.Wait()
		return mb, mf
	}
}

// TestQuotaNobodyAttacks is the inner run of TestQuotaAsNobody: each
// attack in a fresh 256 MiB tmpfs, a neighbour writing every 20 ms. It
// logs, per attack, how far past its bounds the home's file system went
// at its peak (the disk's own count: deleted files held open and
// extended attributes included) and whether the neighbour noticed.
func TestQuotaNobodyAttacks(t *testing.T) {
	if os.Getenv(nobodyDisksEnv) == "" {
		t.Skip("run by TestQuotaAsNobody, as uid 65534")
	}
	t.Logf("uid %d", os.Geteuid())
	// How far past its bounds each attack may take the disk at its peak,
	// as uid 65534 on a host at load 2 to 21 under -race:
	//   - a quarter of the bytes: the fast writer, unheld, ended 14 to
	//     17 MiB past; held, 0.1 to 2.5 MiB;
	//   - three quarters of them for files held open and deleted (their
	//     growth raises events no walk can follow: unread, 5 to 32 MiB
	//     past; with the tree's descriptors read, 1 to 9, 13 and 14 once
	//     each; O_TMPFILE 18 once: TestQuotaNobodyMoreAttacks);
	//   - a fifth of the entries for empty files: unheld 148 to 152 (load
	//     2 to 9; the older notes measured thousands on a busier host);
	//     held 25 to 453;
	//   - extended attributes are refused by the sandbox's seccomp
	//     filter (ENOTSUP): the command fails at its first and is never
	//     stopped. Followed by the count alone they went 179 to 9,312
	//     past (a writer of 4 KB attributes outruns the worker's first
	//     look); unfollowed, 8,224 to 10,733.
	const (
		pastBytes = nobodyBytes / 4
		pastHeld  = nobodyBytes * 3 / 4
		pastFiles = nobodyFiles / 5
		never     = nobodyNever
	)
	for _, a := range []struct {
		name, command string
		bytes, files  int64 // how far past the bounds the disk may go (never: not stopped)
	}{
		{"hard links", `head -c 4194304 /dev/zero > f; i=0; while [ $i -lt 15 ]; do ln f l$i; i=$((i+1)); done; echo linked`, never, never},
		{"million empty files", `i=0; while [ $i -lt 1000000 ]; do : > f$i; i=$((i+1)); done`, pastBytes, pastFiles},
		{"1500 directories then a fast writer", `seq -f d%g 0 1499 | xargs -n 10 mkdir; i=0; while [ $i -lt 200 ]; do head -c 1048576 /dev/zero > d$((i*7%1500))/f$i; i=$((i+1)); done`, pastBytes, pastFiles},
		{"300 levels deep", `p=$(printf 'd/%.0s' $(seq 300)); mkdir -p $p; cd $p; i=0; while [ $i -lt 100 ]; do head -c 1048576 /dev/zero > f$i; i=$((i+1)); done`, pastBytes, pastFiles},
		{"chmod 300 directory", `mkdir d; chmod 300 d; i=0; while [ $i -lt 100 ]; do head -c 1048576 /dev/zero > d/f$i; i=$((i+1)); done`, pastBytes, pastFiles},
		{"xattrs on empty files", `python3 -c '
import os
i = 0
while True:
    f = "x%d" % (i // 64)
    if i % 64 == 0:
        open(f, "w").close()
    os.setxattr(f, "user.a%d" % i, b"v" * 4000)
    i += 1
'`, nobodyNever, nobodyNever}, // refused: see above
		{"deleted files held open", `python3 -c '
import os, time
held = []
for i in range(60):
    f = open("h%d" % i, "wb")
    os.unlink("h%d" % i)
    for j in range(4):
        f.write(b"x" * (1 << 20))
        f.flush()
    held.append(f)
time.sleep(3)
'`, pastHeld, pastFiles},
	} {
		t.Run(strings.ReplaceAll(a.name, " ", "_"), func(t *testing.T) {
			nobodyAttack(t, a.name, a.command, a.bytes, a.files)
		})
	}
}

// nobodyAttack runs command as agent's run_command in a fresh 256 MiB
// tmpfs (homes of 32 MiB and 5,000 entries), a neighbour writing every
// 20 ms, and checks how far past its bounds the disk went at its peak
// (pastBytes, pastFiles; nobodyNever: the command stays within its
// bounds and is not stopped; nobodyLogOnly: logged, not bounded).
// It returns the category, for more checks after.
func nobodyAttack(t *testing.T, name, command string, pastBytes, pastFiles int64) *computer.Category {
	t.Helper()
	disk := nobodyDisk(t)
	c := newCategory(t, computer.Config{Root: filepath.Join(disk, "homes"), HomeQuotaBytes: nobodyBytes, HomeQuotaFiles: nobodyFiles})
	home(t, c, agent)
	home(t, c, "a2")
	stopN := neighbour(t, c)
	stopP := peak(disk)
	res, err := run(t, c, computer.RunCommandName, map[string]any{"command": command, "timeout_seconds": 120})
	pb, pf := stopP()
	nerr := stopN()
	u, _ := c.Usage(agent)
	after := "-"
	if _, werr := run(t, c, computer.WriteFileName, map[string]any{"path": "small", "content": "hello"}); werr != nil {
		after = "refused"
	} else {
		after = "accepted"
	}
	t.Logf("ATTACK %s: peak on disk %d KiB (%+d KiB past %d KiB), %d inodes (%+d past %d); home after %d KiB, %d entries; stopped: %v; 5-byte write_file after: %s; neighbour: %v; output tail %q",
		name, pb>>10, (pb-nobodyBytes)>>10, nobodyBytes>>10, pf, pf-nobodyFiles, nobodyFiles, u.Bytes>>10, u.Files, kindOf(err) == tool.ToolError, after, nerr, tail(res.Content, 120))
	if nerr != nil {
		t.Errorf("the neighbour noticed: %v", nerr)
	}
	if pastBytes == nobodyNever {
		if err != nil || after != "accepted" {
			t.Errorf("stopped (%v) or a 5-byte write_file %s after it: it stays within its bounds", err, after)
		}
		// Within them on the disk too (the neighbour's writes included):
		// an attack the count does not see is not stopped either.
		if pb > nobodyBytes || pf > nobodyFiles {
			t.Errorf("the disk took %d KiB and %d inodes at its peak: past the bounds of a command that is not stopped", pb>>10, pf)
		}
		return c
	}
	// Near its bound a command's file size limit is lowered to the room
	// left (follower.capFiles): a writer the kernel refused is held too.
	refused := err == nil && strings.Contains(res.Content, "file size limit")
	if !refused && (kindOf(err) != tool.ToolError || !strings.Contains(err.Error(), "disk quota")) {
		t.Errorf("not stopped for the quota nor refused by the file size limit: %v", err)
	}
	if pastBytes != nobodyLogOnly && (pb > nobodyBytes+pastBytes || pf > nobodyFiles+pastFiles) {
		t.Errorf("the disk took %d KiB and %d inodes at its peak: more than %d KiB and %d inodes past the bounds", pb>>10, pf, pastBytes>>10, pastFiles)
	}
	return c
}

// How an attack of nobodyAttack is bounded, besides by bytes and inodes.
const (
	nobodyNever   = -1 // the command is not stopped
	nobodyLogOnly = -2 // stopped, how far past is logged
)

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
