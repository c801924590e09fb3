package computer_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/cgroup"
	"github.com/agentbull/toolruntime/internal/sandbox"
	"github.com/agentbull/toolruntime/tool"
)

// cgroupSandbox is a sandbox of the test's own that gives each command a
// cgroup (the worker's default), which paces a fast writer near its
// home's bounds; or skips saying why the host has none.
func cgroupSandbox(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	sb, why := pacingSandbox(t)
	if sb == nil {
		t.Skipf("SKIPPING: %s: the estimator's pacing is not tested", why)
	}
	return sb
}

// pacingSandbox is cgroupSandbox, or nil and why the host has none.
func pacingSandbox(t *testing.T) (*sandbox.Sandbox, string) {
	t.Helper()
	m, err := cgroup.Open(cgroup.Options{Root: "auto"})
	if err != nil {
		return nil, fmt.Sprintf("no cgroup subtree here (%v)", err)
	}
	if !slices.Contains(m.Controllers(), "cpu") {
		_ = m.Close()
		return nil, "no cpu controller in the cgroup subtree"
	}
	sb, err := sandbox.New(sandbox.Config{Cgroups: m})
	if err != nil {
		_ = m.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sb.Close()
		_ = m.Close()
	})
	return sb, ""
}

// attackFiles is the entries bound the estimator's entry attacks run
// against (round 4's), and attackMargin how far past it a home may end:
// a fifth of it. Paced, runs end 1 to 260 past on a loaded 2-core host
// under -race, 800 at worst seen with other suites running beside;
// unpaced, 718 to 2,561 past (and the next writer 1,367 more), so two
// runs of three never hold without pacing.
const (
	attackFiles  = 5000
	attackMargin = attackFiles / 5
)

// A million empty files, in one new directory, in a thousand new
// directories, and from four writers at once: the estimator (the mode of
// hosts that allow no mount) stops each within a fifth of the home's
// 5,000 entries (mostly within a twentieth), the neighbour's writes go on throughout, and the home
// over its bound stops the next writer at once.
func TestQuotaMillionEmptyFiles(t *testing.T) {
	needSandbox(t)
	sb := cgroupSandbox(t)
	for _, tt := range []struct{ name, command string }{
		{"one directory", `mkdir d; i=0; while [ $i -lt 1000000 ]; do : > d/f$i || exit 1; i=$((i+1)); done`},
		{"new directories", `i=0; while [ $i -lt 1000 ]; do mkdir d$i; j=0; while [ $j -lt 1000 ]; do : > d$i/f$j || exit 1; j=$((j+1)); done; i=$((i+1)); done`},
		{"four writers", `for k in 1 2 3 4; do (mkdir d$k; i=0; while [ $i -lt 250000 ]; do : > d$k/f$i || exit 1; i=$((i+1)); done) & done; wait`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			twoOfThree(t, func() (string, time.Duration) {
				c := newCategory(t, computer.Config{Root: fastRoot(t), HomeQuotaBytes: 64 << 20, HomeQuotaFiles: attackFiles, QuotaMode: computer.QuotaEstimate, Sandbox: sb})
				home(t, c, agent)
				home(t, c, "a2")
				stop := neighbour(t, c)
				stall := stallWatch()
				res, err := run(t, c, computer.RunCommandName, map[string]any{"command": tt.command, "timeout_seconds": 120})
				u, _ := c.Usage(agent)
				t.Logf("%d entries (bound %d): %d over", u.Files, attackFiles, u.Files-attackFiles)
				var msg string
				switch {
				case kindOf(err) != tool.ToolError || !strings.Contains(err.Error(), "disk quota"):
					msg = fmt.Sprintf("the writer was not stopped for the quota: %v\n%s", err, res.Content)
				case u.Files-attackFiles > attackMargin:
					msg = fmt.Sprintf("the home ended %d entries over its %d, want at most %d", u.Files-attackFiles, attackFiles, attackMargin)
				case u.Files <= attackFiles:
					// Stopped at or below its bound: the follower
					// counted entries twice (an over-count that stops
					// ordinary use; 4,681 and 4,966 of 5,000 for four
					// writers before each entry counted once).
					msg = fmt.Sprintf("the writer was stopped at %d entries, not past its bound of %d", u.Files, attackFiles)
				}
				// Over its bound, the next writer of entries is stopped
				// at once.
				before := u.Files
				_, err = run(t, c, computer.RunCommandName, map[string]any{"command": `mkdir again; i=0; while [ $i -lt 100000 ]; do : > again/f$i || exit 1; i=$((i+1)); done`, "timeout_seconds": 60})
				u, _ = c.Usage(agent)
				t.Logf("the next writer added %d entries", u.Files-before)
				// A run counts as failed when either writer got past, so
				// the next writer's bound is judged two runs of three
				// like the first one's.
				switch {
				case msg != "":
				case kindOf(err) != tool.ToolError || !strings.Contains(err.Error(), "disk quota"):
					msg = fmt.Sprintf("the next writer, in a home over its bound, was not stopped for the quota: %v", err)
				case before > attackFiles && u.Files-before > attackMargin:
					msg = fmt.Sprintf("the next writer, in a home over its bound, added %d entries, want at most %d", u.Files-before, attackMargin)
				case u.Files-attackFiles > attackMargin:
					// The first writer was stopped below the bound (the
					// estimate counted ahead of the home): the next one
					// may fill the rest, not pass the margin.
					msg = fmt.Sprintf("the next writer left the home %d entries over its %d, want at most %d", u.Files-attackFiles, attackFiles, attackMargin)
				}
				worst := stall()
				if err := stop(); err != nil {
					t.Error(err)
				}
				return msg, worst
			})
		})
	}
}

// 1,500 directories (past the 1,024 watches an older follower kept),
// made ten at a time, then a fast writer of 1 MiB files in the last one: the writer is
// stopped near the quota, the neighbour writes on. (Past the 4,096
// watches a follower keeps now, walks alone find the writer, as in
// TestQuotaBlindSpots; 4,200 directories under -race take minutes.)
func TestQuotaManyDirectoriesFastWriter(t *testing.T) {
	needSandbox(t)
	sb := cgroupSandbox(t)
	for _, dirs := range []int{1500} {
		t.Run(fmt.Sprint(dirs), func(t *testing.T) {
			twoOfThree(t, func() (string, time.Duration) {
				c := newCategory(t, computer.Config{Root: fastRoot(t), HomeQuotaBytes: quotaBytes, HomeQuotaFiles: 20_000, QuotaMode: computer.QuotaEstimate, Sandbox: sb})
				home(t, c, agent)
				home(t, c, "a2")
				stop := neighbour(t, c)
				stall := stallWatch()
				res, err := run(t, c, computer.RunCommandName, map[string]any{"command": fmt.Sprintf(`mkdir w; cd w; seq -f d%%g 0 %d | xargs -n 10 mkdir; cd d%d; i=0; while [ $i -lt 128 ]; do head -c 1048576 /dev/zero > f$i; i=$((i+1)); done; echo done`, dirs-1, dirs-1), "timeout_seconds": 120})
				worst := stall()
				u, _ := c.Usage(agent)
				t.Logf("%d KiB over the %d KiB quota", (u.Bytes-quotaBytes)>>10, quotaBytes>>10)
				var msg string
				switch {
				case kindOf(err) != tool.ToolError || !strings.Contains(err.Error(), "disk quota"):
					msg = fmt.Sprintf("the writer was not stopped for the quota: %v\n%s", err, res.Content)
				case u.Bytes-quotaBytes > 3*quotaBytes:
					// The command is held (its cgroup at a thousandth
					// of a core) while the follower takes in a burst of
					// events, walks under pressure or confirms: under
					// -race beside two busy loops at load 14 to 20, 18
					// runs ended 0.8 to 14 MiB past (median 3), and one
					// run beside the CI's fuzzing 17 MiB. Without the
					// hold a writer the follower had not yet seen wrote
					// on at full speed: 1 to 106 MiB past (median 18),
					// 6 runs of 13 past three times the quota.
					msg = fmt.Sprintf("the home ended %d KiB over its quota, want at most %d", (u.Bytes-quotaBytes)>>10, 3*quotaBytes>>10)
				}
				if err := stop(); err != nil {
					t.Error(err)
				}
				return msg, worst
			})
		})
	}
}
