package computer

import (
	"bytes"
	"context"
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
// uid 65534 by TestQuotaAsNobody: the worker that has no cgroup, whose
// commands run as its own user (root without CAP_SYS_RESOURCE cannot
// lower the limits of a sandbox's other user).
func TestQuotaNobodyHeldFileCapped(t *testing.T) {
	if os.Getenv("TOOLRUNTIME_TEST_NOBODY_DISKS") == "" {
		t.Skip("run by TestQuotaAsNobody, as uid 65534")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("SKIPPING: bwrap is not installed: the tree of a sandboxed command is NOT tested")
	}
	const bound = 32 << 20
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
	// The shell says it runs (past the sandbox's start, which sets its
	// own file size limit) before the test lowers the limit: the
	// follower lowers it again for processes it finds later, but this
	// test calls capFiles once.
	command := `exec 3>held; rm held; : > ready; while [ ! -e go ]; do sleep 0.01; done; head -c 8388608 /dev/zero >&3; echo "size=$(stat -L -c %s /proc/self/fd/3)"`
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
	w.capFiles() // an empty home: nothing lowered
	if tree.fsize != 0 {
		t.Errorf("far from the bound the limit was lowered to %d", tree.fsize)
	}
	w.est.bytes = bound - 1<<20
	w.capFiles()
	if err := os.WriteFile(filepath.Join(h.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_ = r.Wait()
	_, _ = r.End()
	tree.close()
	m := regexp.MustCompile(`size=(\d+)`).FindSubmatch(out.Bytes())
	if m == nil {
		t.Fatalf("no size in the output: %q", out.String())
	}
	got, _ := strconv.ParseInt(string(m[1]), 10, 64)
	if got > 1<<20 {
		t.Errorf("the held file grew to %d bytes with 1 MiB left in its home, want at most %d", got, 1<<20)
	}
	t.Logf("the held file grew to %d bytes with 1 MiB left", got)
}
