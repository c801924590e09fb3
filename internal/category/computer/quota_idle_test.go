package computer_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/sandbox"
)

// A command whose processes the follower holds from userland (no cgroup
// of its own) runs SCHED_IDLE from its first instruction, in a home far
// from its bounds: a thread of the worker that wakes at its events takes
// a core from it at once. Set only at a first freeze or pace, eight
// background writers of files no name holds ran on while a follower the
// host ran late waited for a core, 16 to 41 MiB further at its next look.
func TestTreeCommandIdleFromItsStart(t *testing.T) {
	needSandbox(t)
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("SKIPPING: bwrap is not installed: the tree of a sandboxed command is NOT tested")
	}
	sb, err := sandbox.New(sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	if sb.Cgroups() {
		t.Skip("SKIPPING: the sandbox gives commands a cgroup here: the tree is not used")
	}
	c := newCategory(t, computer.Config{Root: fastRoot(t), HomeQuotaBytes: 64 << 20, HomeQuotaFiles: 5000, QuotaMode: computer.QuotaEstimate, Sandbox: sb})
	home(t, c, agent)
	// Field 39 after the command's name in /proc/<pid>/stat is the
	// scheduling policy (5: SCHED_IDLE); a background process shows what
	// the command's children inherit.
	res, err := run(t, c, computer.RunCommandName, map[string]any{"command": `sh -c 'cut -d")" -f2 /proc/self/stat | cut -d" " -f40' & wait`})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(strings.SplitN(res.Content, "\n", 2)[0]); got != "5" {
		t.Errorf("the command's process runs at scheduling policy %q, want 5 (SCHED_IDLE)\n%s", got, res.Content)
	}
}
