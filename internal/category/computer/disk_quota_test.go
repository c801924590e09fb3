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
	"time"

	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/tool"
)

// Overshoot bounds: a command may pass its quota by what it writes until
// the worker sees it and kills it (README, "Disk quota and full disks"),
// and the bounds leave a wide margin for a loaded host. Without the quota
// every writer below ends some 56 MiB (or 19,000 files) over, so each
// check still fails when the quota does not hold.
const (
	quotaBytes        = 8 << 20
	quotaFiles        = 1000
	maxOvershootBytes = 6 << 20
	// A writer of empty files in a directory it just made runs ahead
	// of the watch on that directory until a walk finds them: on an
	// idle 2-core machine the estimate ended 1,239 to 2,026 entries
	// over (a loaded one is slower to write, so less). Only the kernel
	// mode holds entries exactly (docs/operations.md).
	maxOvershootFiles  = 3000
	writerBytesInTotal = 64 << 20 // each writer stops by itself after this
)

// stallLimit is how long the host may leave this process unrun during a
// run before that run's overshoot is put down to the host: the quota's
// watch runs in this process, so it sat through the same stall, and a
// writer at tmpfs speed passes the bounds above in about this long.
const stallLimit = 50 * time.Millisecond

// Fast writers against an 8 MiB, 1000-entry quota: in each run every
// command is stopped with a quota error and the home ends at most
// maxOvershootBytes (or maxOvershootFiles) over. The bound is one in
// time (what the worker sees before it kills), so a run over it during
// which the host did not run this process for stallLimit or more proves
// nothing either way: it is logged and run again, once; any other run
// over the bound fails the test, and so does a second stalled one. Two
// runs must hold. The writers are bounded, so that a quota that fails
// costs 64 MiB of disk, not the whole disk. TOOLRUNTIME_QUOTA_MEASURE=1
// also measures walks without inotify, and runs and logs three times.
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
			// worker most, hence the wider bound, which still fails
			// when the quota does not stop the four.
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
				twoOfThree(t, func() (string, time.Duration) { return overshoot(t, sc.commands, walksOnly, bound) })
			})
		}
	}
}

// twoOfThree runs measure until it has held twice. A run that does not
// hold (measure says how, and the longest stall while its commands ran)
// fails t, unless that stall is stallLimit or more: the run is then
// logged and run again, and a second such run fails t too. With
// TOOLRUNTIME_QUOTA_MEASURE it runs three times and logs each.
func twoOfThree(t *testing.T, measure func() (string, time.Duration)) {
	t.Helper()
	measureAll := os.Getenv("TOOLRUNTIME_QUOTA_MEASURE") != ""
	var stalled []string
	held := 0
	for run := 1; run <= 3; run++ {
		msg, stall := measure()
		t.Logf("run %d: the longest stall of this process while the commands ran: %v", run, stall.Round(time.Millisecond))
		switch {
		case msg == "":
			held++
		case stall < stallLimit:
			t.Errorf("run %d: %s, with no stall of %v or more to explain it", run, msg, stallLimit)
			return
		default:
			stalled = append(stalled, fmt.Sprintf("run %d: %s, while this process was not run for %v", run, msg, stall.Round(time.Millisecond)))
			t.Log(stalled[len(stalled)-1])
		}
		if len(stalled) == 2 {
			t.Errorf("two runs did not hold, each during a stall:\n%s", strings.Join(stalled, "\n"))
			return
		}
		if held == 2 && !measureAll {
			return
		}
	}
}

// stallWatch measures, until stop is called, the longest a goroutine of
// this process that asks to wake every millisecond waited past that: how
// long the host (or the Go runtime) left the process unrun.
func stallWatch() (stop func() time.Duration) {
	done := make(chan struct{})
	worst := make(chan time.Duration)
	go func() {
		var longest time.Duration
		timer := time.NewTimer(time.Millisecond)
		defer timer.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				worst <- longest
				return
			case <-timer.C:
				now := time.Now()
				longest = max(longest, now.Sub(last)-time.Millisecond)
				last = now
				timer.Reset(time.Millisecond)
			}
		}
	}()
	return func() time.Duration {
		close(done)
		return <-worst
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
// quota failed ("": it held), and the longest stall while they ran.
func overshoot(t *testing.T, commands []string, walksOnly bool, bound int64) (string, time.Duration) {
	c := newCategory(t, computer.Config{Root: fastRoot(t), HomeQuotaBytes: quotaBytes, HomeQuotaFiles: quotaFiles})
	if walksOnly {
		computer.QuotaWalksOnly(c)
	}
	home(t, c, agent)
	var wg sync.WaitGroup
	outs := make([]string, len(commands))
	errs := make([]error, len(commands))
	stop := stallWatch()
	for i, cmd := range commands {
		wg.Go(func() {
			res, err := runCtx(t, context.Background(), c, agent, computer.RunCommandName, map[string]any{"command": cmd, "timeout_seconds": 120})
			outs[i], errs[i] = res.Content, err
		})
	}
	wg.Wait()
	stall := stop()
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
	return msg, stall
}

// A hostile command writes in the last of 1100 directories made ten at
// a time (each watched as the events name it), through mmap (no event),
// and in a directory it keeps moving: the quota still stops each near
// its bound. The entries bound is far enough that the directories do
// not get the writer paced.
func TestQuotaBlindSpots(t *testing.T) {
	needSandbox(t)
	for _, tt := range []struct{ name, command string }{
		{"1100 directories", `mkdir -p w; cd w; seq -f d%g 0 1099 | xargs -n 10 mkdir; cd d1099; i=0; while [ $i -lt 128 ]; do head -c 1048576 /dev/zero > f$i; i=$((i+1)); done`},
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
			twoOfThree(t, func() (string, time.Duration) {
				c := newCategory(t, computer.Config{Root: fastRoot(t), HomeQuotaBytes: quotaBytes, HomeQuotaFiles: 100_000})
				home(t, c, agent)
				stop := stallWatch()
				res, err := run(t, c, computer.RunCommandName, map[string]any{"command": tt.command, "timeout_seconds": 120})
				stall := stop()
				// Walks are the only defence here, and a walk of 1100
				// directories under -race on a busy host takes long: the
				// bound is loose, and still fails if nothing stops the
				// 128 MiB.
				u, _ := c.Usage(agent)
				t.Logf("overshoot: %d KiB", (u.Bytes-quotaBytes)>>10)
				switch {
				case kindOf(err) != tool.ToolError || !strings.Contains(err.Error(), "disk quota"):
					return fmt.Sprintf("the writer was not stopped for the quota: %v\n%s", err, res.Content), stall
				case u.Bytes-quotaBytes > 8*maxOvershootBytes:
					return fmt.Sprintf("the home is %d KiB over its quota", (u.Bytes-quotaBytes)>>10), stall
				}
				return "", stall
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
