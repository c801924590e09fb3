package computer_test

import (
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/cgroup"
	"github.com/agentbull/toolruntime/internal/sandbox"
)

// Through run_command, as a hostile model would: a command that fills its
// /tmp and /dev/shm and holds a memfd is killed in its own cgroup, the
// answer says which limit, and the next command runs.
func TestCommandMemoryInItsCgroup(t *testing.T) {
	needSandbox(t)
	m, err := cgroup.Open(cgroup.Options{Root: "auto"})
	if err != nil {
		t.Skipf("SKIPPING: no cgroup subtree here (%v); the command cgroups are NOT tested through run_command", err)
	}
	sb, err := sandbox.New(sandbox.Config{Cgroups: m, Limits: sandbox.Limits{Memory: 128 << 20, TmpBytes: 96 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	c := newCategory(t, computer.Config{Sandbox: sb})
	home(t, c, agent)
	out := probe(t, c, `head -c 40m /dev/zero >/tmp/f && head -c 40m /dev/zero >/dev/shm/f && echo filled &&
perl -e '$n = "m"; $fd = syscall(319, $n, 0); open(F, ">&=", $fd) or die; $b = "x" x (1 << 20); for (1..200) { print F $b or die "write: $!" } print "held\n"; sleep 30'`)
	if !strings.Contains(out, "filled") || strings.Contains(out, "held") || !strings.Contains(out, "killed by the sandbox's memory limit") || !strings.Contains(out, "128 MiB") {
		t.Errorf("the hog's answer:\n%s", out)
	}
	if out := probe(t, c, `echo fine`); !strings.Contains(out, "fine\n[exit status 0]") {
		t.Errorf("after the hog: %s", out)
	}
}
