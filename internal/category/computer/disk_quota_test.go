package computer_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/tool"
)

// Overshoot bounds, with a wide margin over what was measured (README,
// "Disk quota and full disks"): under load a command may pass its quota
// by what it writes until the worker sees it and kills it. Without the
// quota every writer below ends 56 MiB (or 19,000 files) over, so each
// check still fails when the quota does not hold.
const (
	quotaBytes         = 8 << 20
	quotaFiles         = 1000
	maxOvershootBytes  = 6 << 20
	maxOvershootFiles  = 600
	writerBytesInTotal = 64 << 20 // each writer stops by itself after this
)

// Fast writers against an 8 MiB, 1000-entry quota: each is stopped with
// a quota error, and the home ends at most maxOvershootBytes (or
// maxOvershootFiles) over in at least two of three runs: a host so busy
// that it does not run the worker for a while lets a writer run on (the
// bound is what the worker sees in time), and one such stall must not
// fail the test; a quota that does not hold fails every run. The writers
// are bounded, so that a quota that fails costs 64 MiB of disk, not the
// whole disk. TOOLRUNTIME_QUOTA_MEASURE=1 also measures walks without
// inotify, and logs every run.
func TestQuotaOvershoot(t *testing.T) {
	needSandbox(t)
	scenarios := []struct {
		name     string
		commands []string
		bound    int64 // 0: maxOvershootBytes
	}{
		{"one big file", []string{`head -c 67108864 /dev/zero > big`}, 0},
		{"1 MiB files", []string{`i=0; while [ $i -lt 64 ]; do head -c 1048576 /dev/zero > f$i; i=$((i+1)); done`}, 0},
		{"tiny files", []string{`mkdir d; i=0; while [ $i -lt 20000 ]; do : > d/f$i; i=$((i+1)); done`}, 0},
		{"four commands", []string{
			`mkdir a; i=0; while [ $i -lt 16 ]; do head -c 1048576 /dev/zero > a/f$i; i=$((i+1)); done`,
			`mkdir b; i=0; while [ $i -lt 16 ]; do head -c 1048576 /dev/zero > b/f$i; i=$((i+1)); done`,
			`mkdir c; i=0; while [ $i -lt 16 ]; do head -c 1048576 /dev/zero > c/f$i; i=$((i+1)); done`,
			`head -c 16777216 /dev/zero > d`,
			// Each started with the whole room (8 MiB) as its file size
			// limit: the 16 MiB file may fill it in one burst before the
			// kill lands, while the loops fill the quota; and four
			// sandboxes on two cores busy with other work starve the
			// worker most (31 MiB over once, under -race at a load of 14).
			// Without the follower they end 48-56 MiB over.
		}, 4 * quotaBytes},
	}
	modes := []bool{false}
	if os.Getenv("TOOLRUNTIME_QUOTA_MEASURE") != "" {
		modes = append(modes, true)
	}
	for _, walksOnly := range modes {
		for _, sc := range scenarios {
			name := sc.name
			if walksOnly {
				name += ", walks only"
			}
			t.Run(name, func(t *testing.T) {
				bound := cmp.Or(sc.bound, maxOvershootBytes)
				twoOfThree(t, func() string { return overshoot(t, sc.commands, walksOnly, bound) })
			})
		}
	}
}

// twoOfThree runs a measurement until it has held twice (or failed
// twice, failing t with what it said); with TOOLRUNTIME_QUOTA_MEASURE it
// runs three times and logs each.
func twoOfThree(t *testing.T, measure func() string) {
	t.Helper()
	measureAll := os.Getenv("TOOLRUNTIME_QUOTA_MEASURE") != ""
	var failed []string
	held := 0
	for range 3 {
		if msg := measure(); msg != "" {
			failed = append(failed, msg)
		} else {
			held++
		}
		if !measureAll && (held == 2 || len(failed) == 2) {
			break
		}
	}
	if len(failed) >= 2 {
		t.Errorf("the quota did not hold in %d runs:\n%s", len(failed), strings.Join(failed, "\n"))
	}
}

// fastRoot is a fresh tmpfs for the homes where the test may mount one
// (the fastest writer: what CI's full-disk test met), else a directory.
func fastRoot(t *testing.T) string {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256m,mode=0700"); err != nil {
		return filepath.Join(dir, "homes")
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return filepath.Join(dir, "homes")
}

// overshoot runs commands at once in a fresh home and says how the
// quota failed ("": it held).
func overshoot(t *testing.T, commands []string, walksOnly bool, bound int64) string {
	c := newCategory(t, computer.Config{Root: fastRoot(t), HomeQuotaBytes: quotaBytes, HomeQuotaFiles: quotaFiles})
	if walksOnly {
		computer.QuotaWalksOnly(c)
	}
	home(t, c, agent)
	var wg sync.WaitGroup
	outs := make([]string, len(commands))
	errs := make([]error, len(commands))
	for i, cmd := range commands {
		wg.Go(func() {
			res, err := runCtx(t, context.Background(), c, agent, computer.RunCommandName, map[string]any{"command": cmd, "timeout_seconds": 120})
			outs[i], errs[i] = res.Content, err
		})
	}
	wg.Wait()
	u, err := c.Usage(agent)
	if err != nil {
		t.Fatal(err)
	}
	overBytes, overFiles := u.Bytes-quotaBytes, u.Files-quotaFiles
	t.Logf("overshoot: %d KiB, %d files (usage %d KiB, %d files)", overBytes>>10, overFiles, u.Bytes>>10, u.Files)
	var msg string
	if overBytes > bound || overFiles > maxOvershootFiles {
		msg = fmt.Sprintf("the home is %d KiB and %d entries over its quota, want at most %d KiB and %d", overBytes>>10, overFiles, bound>>10, maxOvershootFiles)
	}
	// Whatever stopped each command (the watch, or the file size
	// limit at the room left), the answer names the quota.
	for i := range outs {
		if !strings.Contains(fmt.Sprint(errs[i])+outs[i], "disk quota") {
			t.Errorf("command %d's answer does not name the quota: %v\n%s", i, errs[i], outs[i])
		}
	}
	// Over (or at) the quota, a write_file that grows the home is
	// refused; rm frees the home.
	if _, err := run(t, c, computer.WriteFileName, map[string]any{"path": "more", "content": strings.Repeat("x", 1<<20)}); kindOf(err) != tool.ToolError || !strings.Contains(err.Error(), "disk quota") {
		t.Errorf("write_file of 1 MiB after the writer: %v", err)
	}
	if _, err := run(t, c, computer.RunCommandName, map[string]any{"command": "rm -rf ./*"}); err != nil {
		t.Fatalf("rm: %v", err)
	}
	return msg
}

// A hostile command writes where inotify does not look (past the 1024
// directories a command's watch may hold) and a second one keeps moving
// the directory it writes in: the walks still stop both near the quota.
func TestQuotaBlindSpots(t *testing.T) {
	needSandbox(t)
	for _, tt := range []struct{ name, command string }{
		{"past the watches", `mkdir -p w; cd w; i=0; while [ $i -lt 1100 ]; do mkdir d$i; i=$((i+1)); done; cd d1099; i=0; while [ $i -lt 128 ]; do head -c 1048576 /dev/zero > f$i; i=$((i+1)); done`},
		// Pages written through mmap raise no inotify event; the files
		// stay open to the end, so that no close_write tells either.
		{"mmap", `python3 -c '
import mmap, os
maps = []
for i in range(128):
    fd = os.open("m%d" % i, os.O_RDWR | os.O_CREAT)
    os.ftruncate(fd, 1 << 20)
    m = mmap.mmap(fd, 1 << 20)
    m[:] = b"x" * (1 << 20)
    maps.append((fd, m))
'`},
		{"moving directories", `mkdir a; i=0; while [ $i -lt 128 ]; do mv a b; mv b a; head -c 1048576 /dev/zero > a/f$i; i=$((i+1)); done`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			twoOfThree(t, func() string {
				c := newCategory(t, computer.Config{Root: fastRoot(t), HomeQuotaBytes: quotaBytes, HomeQuotaFiles: 10_000})
				home(t, c, agent)
				res, err := run(t, c, computer.RunCommandName, map[string]any{"command": tt.command, "timeout_seconds": 120})
				// Walks are the only defence here, and a walk of 1100
				// directories under -race on a busy host takes long (33 MiB
				// over once, at a load of 14): the bound is loose, and
				// still fails if nothing stops the 128 MiB.
				u, _ := c.Usage(agent)
				t.Logf("overshoot: %d KiB", (u.Bytes-quotaBytes)>>10)
				switch {
				case kindOf(err) != tool.ToolError || !strings.Contains(err.Error(), "disk quota"):
					return fmt.Sprintf("the writer was not stopped for the quota: %v\n%s", err, res.Content)
				case u.Bytes-quotaBytes > 8*maxOvershootBytes:
					return fmt.Sprintf("the home is %d KiB over its quota", (u.Bytes-quotaBytes)>>10)
				}
				return ""
			})
		})
	}
}

// The estimate errs high, never the verdict: a command that rewrites a
// 5 MiB file in place, twice, in a home of 8 MiB (the estimate counts the
// file again, 10 MiB) runs to its end, since a walk finds 5 MiB.
func TestQuotaRewriteInPlace(t *testing.T) {
	needSandbox(t)
	c := newCategory(t, computer.Config{Root: fastRoot(t), HomeQuotaBytes: quotaBytes, HomeQuotaFiles: quotaFiles})
	home(t, c, agent)
	if _, err := run(t, c, computer.RunCommandName, map[string]any{"command": "head -c 5242880 /dev/zero > data"}); err != nil {
		t.Fatal(err)
	}
	res, err := run(t, c, computer.RunCommandName, map[string]any{"command": "for i in 1 2; do dd if=/dev/zero of=data bs=1048576 count=5 conv=notrunc 2>/dev/null; done; echo rewritten"})
	if err != nil || !strings.Contains(res.Content, "rewritten") {
		t.Fatalf("a rewrite in place, within the quota: %v\n%s", err, res.Content)
	}
}
