package computer

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/sandbox"
)

// A file deleted while held open grows where no walk sees it, and a
// worker run late looks at it late: within the last eighth of its
// home's bytes bound, the follower lowers the command's RLIMIT_FSIZE to
// the room its estimate leaves, and the kernel refuses the growth past
// it however late the worker looks again. Here the command waits until
// its home is near the bound, then writes 8 MiB into a file it deleted:
// it gets 1 MiB, the room left (8 MiB without the lowered limit). Far
// from the bound the limit is left as the command started with. Run as
// uid 65534 by TestQuotaAsNobody (heldCapRun).
func TestQuotaNobodyHeldFileCapped(t *testing.T) {
	const bound = 32 << 20
	// The shell says it runs (past the sandbox's start, which sets its
	// own file size limit) before the test lowers the limit: the
	// follower lowers it again for processes it finds later, but this
	// test calls capFiles once.
	out := heldCapRun(t, bound, `exec 3>held; rm held; : > ready; while [ ! -e go ]; do sleep 0.01; done; head -c 8388608 /dev/zero >&3; echo "size=$(stat -L -c %s /proc/self/fd/3)"`,
		func(w *follower, tree *procTree) {
			w.capFiles() // an empty home: nothing lowered
			if tree.fsize != 0 {
				t.Errorf("far from the bound the limit was lowered to %d", tree.fsize)
			}
			w.est.bytes = bound - 1<<20
			w.capFiles()
		})
	got := heldSizes(t, out)[0]
	if got > 1<<20 {
		t.Errorf("the held file grew to %d bytes with 1 MiB left in its home, want at most %d", got, 1<<20)
	}
	t.Logf("the held file grew to %d bytes with 1 MiB left", got)
}

// Four files no name holds, of 2 MiB each, with 4 MiB left in their
// home: each may reach 3 MiB, so that all four together add the 4 MiB
// (a limit of the room, 4 MiB, let them add 8). Run as uid 65534 by
// TestQuotaAsNobody.
func TestQuotaNobodyHeldFilesShareTheRoom(t *testing.T) {
	const bound = 32 << 20
	out := heldCapRun(t, bound, `exec 3>h3 4>h4 5>h5 6>h6; for fd in 3 4 5 6; do head -c 2097152 /dev/zero >&$fd; done; rm h3 h4 h5 h6; : > ready; while [ ! -e go ]; do sleep 0.01; done
for fd in 3 4 5 6; do head -c 8388608 /dev/zero >&$fd; echo "size=$(stat -L -c %s /proc/self/fd/$fd)"; done`,
		func(w *follower, tree *procTree) {
			held, sizes := tree.heldBy(w.dev, false)
			if held != 4*2<<20 || len(sizes) != 4 {
				t.Fatalf("the tree holds %d bytes in %d files with no name, want 8 MiB in 4", held, len(sizes))
			}
			w.held, w.heldSizes = held, sizes
			w.est.bytes = bound - 4<<20
			w.capFiles()
		})
	sizes := heldSizes(t, out)
	if len(sizes) != 4 {
		t.Fatalf("%d sizes in the output, want 4: %q", len(sizes), out)
	}
	var grew int64
	for _, n := range sizes {
		grew += n - 2<<20
	}
	if grew > 4<<20 {
		t.Errorf("the four held files grew by %d KiB with 4 MiB left in their home", grew>>10)
	}
	t.Logf("the four held files grew by %d KiB with 4,096 KiB left", grew>>10)
}

// heldCapRun runs command, sandboxed, in a home of bound bytes whose
// follower has the command's tree, as uid 65534 (the worker that has no
// cgroup, whose commands run as its own user: root without
// CAP_SYS_RESOURCE cannot lower the limits of a sandbox's other user).
// The command makes a file "ready" once set up, then waits for a file
// "go", which the test makes after it called prepare.
func heldCapRun(t *testing.T, bound int64, command string, prepare func(*follower, *procTree)) string {
	t.Helper()
	if os.Getenv("TOOLRUNTIME_TEST_NOBODY_DISKS") == "" {
		t.Skip("run by TestQuotaAsNobody, as uid 65534")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("SKIPPING: bwrap is not installed: the tree of a sandboxed command is NOT tested")
	}
	q, h := quotaHome(t, Config{HomeQuotaBytes: bound})
	if err := os.Chmod(h.dir, 0o777); err != nil {
		t.Fatal(err)
	}
	w := q.follow(h)
	defer w.close()
	sb, err := sandbox.New(sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	r, err := sb.Start(ctx, sandbox.Spec{Home: h.dir, Shell: "/bin/sh", Command: command}, &out, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Tree() <= 0 {
		cancel()
		_ = r.Wait()
		_, _ = r.End()
		t.Skip("SKIPPING: the sandbox gives commands a cgroup here: the tree is not used")
	}
	for ready := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(h.dir, "ready")); err == nil {
			break
		}
		if time.Now().After(ready) {
			t.Fatal("the command did not start within 30 s")
		}
	}
	tree := newProcTree(r.Tree())
	w.setTree(tree)
	prepare(w, tree)
	if err := os.WriteFile(filepath.Join(h.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_ = r.Wait()
	_, _ = r.End()
	tree.close()
	return out.String()
}

// heldSizes reads the "size=N" lines of a command's output.
func heldSizes(t *testing.T, out string) []int64 {
	t.Helper()
	var sizes []int64
	for _, m := range regexp.MustCompile(`size=(\d+)`).FindAllStringSubmatch(out, -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		sizes = append(sizes, n)
	}
	if len(sizes) == 0 {
		t.Fatalf("no size in the output: %q", out)
	}
	return sizes
}

// fillLevel is the highest level to which files of the given sizes all
// grow by at most the room.
func TestFillLevel(t *testing.T) {
	for _, c := range []struct {
		sizes       []int64
		room, level int64
	}{
		{nil, 5, 5},
		{[]int64{3}, 4, 7},
		{[]int64{2, 2, 2, 2}, 4, 3},
		{[]int64{0, 10}, 4, 4},
		{[]int64{10, 0, 1}, 9, 5},
		{[]int64{10, 0, 1}, 0, 0},
		{[]int64{5, 5}, 1, 5},
	} {
		if got := fillLevel(c.sizes, c.room); got != c.level {
			t.Errorf("fillLevel(%v, %d) = %d, want %d", c.sizes, c.room, got, c.level)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	grow := func(sizes []int64, level int64) (n int64) {
		for _, s := range sizes {
			n += max(0, level-s)
		}
		return n
	}
	for range 2000 {
		sizes := make([]int64, 1+r.IntN(10))
		for i := range sizes {
			sizes[i] = r.Int64N(1 << 20)
		}
		room := r.Int64N(4 << 20)
		l := fillLevel(sizes, room)
		if grow(sizes, l) > room || grow(sizes, l+1) <= room {
			t.Fatalf("fillLevel(%v, %d) = %d: the files grow by %d to it, by %d to one more", sizes, room, l, grow(sizes, l), grow(sizes, l+1))
		}
	}
}
