package computer_test

import (
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/category/computer"
)

// Ordinary commands that leave a home truly below its 5,000 entries are
// not stopped, and write_file works after them, a neighbour writing
// beside. Each makes its entries in a way the follower once counted
// twice: files saved by writing a temporary name and renaming it over
// the old one (the replaced entry raises no event of its own, so every
// save counted one entry more until the next walk: a package manager's
// or an editor's atomic saves were stopped at a few thousand), and a
// burst of entries made, deleted and made again while the follower's
// walks counted them (their events, read after the walk, counted them
// again: a writer of empty files was stopped at 4,005 of 5,000). Where
// a command has a cgroup the entries' count stops it without a walk
// that confirms, so an over-count is a stop. The atomic saves leave
// 4,954 entries, near enough to the bound that the double count stopped
// them in 2 runs of 2 on a quiet machine before the entries were
// counted once (4,474 entries, as first written, were stopped only on a
// loaded one); one run each.
func TestQuotaOrdinaryCommandBelowTheBound(t *testing.T) {
	needSandbox(t)
	sb := cgroupSandbox(t)
	for _, tt := range []struct{ name, command string }{
		{"atomic saves", `python3 -c '
import os
for d in range(30):
    os.makedirs("pkg/d%d" % d)
    for i in range(164):
        p = "pkg/d%d/f%d" % (d, i)
        with open(p + ".part", "w") as f:
            f.write("x")
        os.replace(p + ".part", p)
for r in range(3):
    for d in range(30):
        for i in range(164):
            p = "pkg/d%d/f%d" % (d, i)
            with open(p + ".tmp", "w") as f:
                f.write("y")
            os.replace(p + ".tmp", p)
print("saved")
'`},
		{"made, deleted and made again by four writers", `for k in 1 2 3 4; do python3 -c '
import os, sys
d = "x" + sys.argv[1]
os.mkdir(d)
for i in range(1120):
    open("%s/f%d" % (d, i), "w").close()
for r in range(8):
    for i in range(r % 4, 1120, 4):
        os.unlink("%s/f%d" % (d, i))
    for i in range(r % 4, 1120, 4):
        open("%s/f%d" % (d, i), "w").close()
' $k & done; wait; echo saved`},
	} {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			c := newCategory(t, computer.Config{Root: fastRoot(t), HomeQuotaBytes: 64 << 20, HomeQuotaFiles: attackFiles, QuotaMode: computer.QuotaEstimate, Sandbox: sb})
			home(t, c, agent)
			home(t, c, "a2")
			stop := neighbour(t, c)
			res, err := run(t, c, computer.RunCommandName, map[string]any{"command": tt.command, "timeout_seconds": 120})
			u, _ := c.Usage(agent)
			t.Logf("%d entries of %d; stopped: %v", u.Files, attackFiles, err)
			if u.Files >= attackFiles {
				t.Fatalf("the command left %d entries: the test must stay below its bound of %d", u.Files, attackFiles)
			}
			if err != nil || !strings.Contains(res.Content, "saved") {
				t.Errorf("a command that left %d entries of %d was stopped: %v\n%s", u.Files, attackFiles, err, res.Content)
			}
			if _, err := run(t, c, computer.WriteFileName, map[string]any{"path": "small", "content": "hello"}); err != nil {
				t.Errorf("a 5-byte write_file refused in a home of %d entries of %d: %v", u.Files, attackFiles, err)
			}
			if err := stop(); err != nil {
				t.Error(err)
			}
		})
	}
}
