package computer_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/tool"
)

// neighbour runs a second agent beside an attack: a2 writes a small file
// every 20 ms until stop is called, which returns its first failure.
func neighbour(t *testing.T, c *computer.Category) (stop func() error) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	var first error
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			_, err := runCtx(t, context.Background(), c, "a2", computer.WriteFileName, map[string]any{"path": fmt.Sprintf("n%d", i%8), "content": strings.Repeat("n", 4096)})
			if err != nil && first == nil {
				first = fmt.Errorf("a2's write_file %d beside the attack: %w", i, err)
			}
		}
	})
	return func() error {
		close(done)
		wg.Wait()
		return first
	}
}

// gapQuota is the small quota the estimator's attacks run against.
func gapCategory(t *testing.T, files int64) *computer.Category {
	c := newCategory(t, computer.Config{Root: fastRoot(t), HomeQuotaBytes: quotaBytes, HomeQuotaFiles: files})
	home(t, c, agent)
	home(t, c, "a2")
	return c
}

// Hard links: 15 more names of one 4 MiB file are 4 MiB, not 64 (the
// estimator counted each name): the command runs to its end and a
// 5-byte write_file is accepted after.
func TestQuotaHardLinksCountOnce(t *testing.T) {
	needSandbox(t)
	c := gapCategory(t, quotaFiles)
	stop := neighbour(t, c)
	res, err := run(t, c, computer.RunCommandName, map[string]any{"command": `head -c 4194304 /dev/zero > f; i=0; while [ $i -lt 15 ]; do ln f l$i; i=$((i+1)); done; echo linked`})
	if err != nil || !strings.Contains(res.Content, "linked") {
		t.Fatalf("15 hard links of a 4 MiB file in an 8 MiB home: %v\n%s", err, res.Content)
	}
	if _, err := run(t, c, computer.WriteFileName, map[string]any{"path": "small", "content": "hello"}); err != nil {
		t.Errorf("a 5-byte write_file after the links: %v", err)
	}
	u, _ := c.Usage(agent)
	t.Logf("usage with 16 names of one 4 MiB file: %d KiB", u.Bytes>>10)
	if u.Bytes > 5<<20 {
		t.Errorf("usage %d KiB, want the file once (about 4096 KiB)", u.Bytes>>10)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
}

// Past the walk's old depth limit (256): 6 files of 4 MiB 300
// directories down in an 8 MiB home are counted and the writer stopped.
func TestQuotaDeepTree(t *testing.T) {
	needSandbox(t)
	c := gapCategory(t, quotaFiles)
	stop := neighbour(t, c)
	res, err := run(t, c, computer.RunCommandName, map[string]any{"command": `p=$(printf 'd/%.0s' $(seq 300)); mkdir -p $p; cd $p; j=0; while [ $j -lt 6 ]; do head -c 4194304 /dev/zero > f$j; j=$((j+1)); done; sleep 2; echo done`, "timeout_seconds": 60})
	if kindOf(err) != tool.ToolError || !strings.Contains(err.Error(), "disk quota") {
		t.Errorf("24 MiB 300 levels down in an 8 MiB home: %v\n%s", err, res.Content)
	}
	u, _ := c.Usage(agent)
	t.Logf("usage: %d KiB of %d KiB", u.Bytes>>10, quotaBytes>>10)
	if u.Bytes <= quotaBytes {
		t.Errorf("usage %d KiB: the files 300 levels down are not counted", u.Bytes>>10)
	}
	if _, err := run(t, c, computer.WriteFileName, map[string]any{"path": "more", "content": strings.Repeat("x", 1<<20)}); kindOf(err) != tool.ToolError {
		t.Errorf("write_file of 1 MiB in the home over its quota: %v", err)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
}

// Extended attributes on empty files: the sandbox refuses to set them
// (ENOTSUP, as a file system without them would), so 64 MB of them
// (which tmpfs would charge to its inodes, faster than a count could
// follow) never reach the disk, and the neighbour writes on.
func TestQuotaXattrs(t *testing.T) {
	needSandbox(t)
	c := gapCategory(t, quotaFiles)
	stop := neighbour(t, c)
	res, err := run(t, c, computer.RunCommandName, map[string]any{"command": `python3 -c '
import os, time
for i in range(16000):
    f = "x%d" % (i // 100)
    if i % 100 == 0:
        open(f, "w").close()
    os.setxattr(f, "user.a%d" % i, b"v" * 4000)
time.sleep(2)
print("done")
'`, "timeout_seconds": 60})
	if err != nil || !strings.Contains(res.Content, "Operation not supported") || strings.Contains(res.Content, "done") {
		t.Errorf("64 MB of extended attributes in an 8 MiB home, want ENOTSUP at the first: %v\n%s", err, res.Content)
	}
	u, _ := c.Usage(agent)
	t.Logf("usage: %d KiB, %d entries", u.Bytes>>10, u.Files)
	if u.Bytes > 64<<10 || u.Files > 8 {
		t.Errorf("usage %d KiB, %d entries after a refused attribute", u.Bytes>>10, u.Files)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
}

// A home already over its file bound is stopped again at every further
// command that adds entries: the second writer of empty files ends near
// where the first left the home, not 20,000 entries later.
func TestQuotaOverFileBoundStopsAgain(t *testing.T) {
	needSandbox(t)
	const bound = 2000
	c := gapCategory(t, bound)
	stop := neighbour(t, c)
	var ends []int64
	for i := range 3 {
		res, err := run(t, c, computer.RunCommandName, map[string]any{"command": fmt.Sprintf(`mkdir d%d; i=0; while [ $i -lt 20000 ]; do : > d%d/f$i; i=$((i+1)); done; echo done`, i, i), "timeout_seconds": 60})
		if kindOf(err) != tool.ToolError || !strings.Contains(err.Error(), "disk quota") {
			t.Errorf("writer %d of 20,000 empty files in a home of %d entries: %v\n%s", i, bound, err, res.Content)
		}
		u, _ := c.Usage(agent)
		ends = append(ends, u.Files)
	}
	t.Logf("entries after each writer: %v (bound %d)", ends, bound)
	for i := 1; i < len(ends); i++ {
		if grew := ends[i] - ends[i-1]; grew > 2*maxOvershootFiles {
			t.Errorf("writer %d, in a home already over its bound, added %d entries before it was stopped, want at most %d", i, grew, 2*maxOvershootFiles)
		}
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
}

// Files deleted but held open: 16 files of 4 MiB, each unlinked at once
// and written on, take the disk while no walk sees them; they count for
// the home and the writer is stopped.
func TestQuotaDeletedHeldOpen(t *testing.T) {
	needSandbox(t)
	c := gapCategory(t, quotaFiles)
	stop := neighbour(t, c)
	res, err := run(t, c, computer.RunCommandName, map[string]any{"command": `python3 -c '
import os, time
held = []
for i in range(16):
    f = open("h%d" % i, "wb")
    os.unlink("h%d" % i)
    for j in range(4):
        f.write(b"x" * (1 << 20))
        f.flush()
        time.sleep(0.01)
    held.append(f)
time.sleep(3)
print("done")
'`, "timeout_seconds": 60})
	if kindOf(err) != tool.ToolError || !strings.Contains(err.Error(), "disk quota") {
		t.Errorf("64 MiB in deleted files held open, in an 8 MiB home: %v\n%s", err, res.Content)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
}
