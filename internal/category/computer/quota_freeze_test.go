package computer

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/sandbox"
)

// A command's processes cannot leave the tree that holds them: writers
// started with setsid, double forks (orphans, re-parented to the
// sandbox's init) and new process groups all stop with the freeze and
// go on with the thaw; the duty cycle lets them run and stops them
// again; close continues them.
func TestProcTreeHoldsEscapes(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("SKIPPING: bwrap is not installed: the tree of a sandboxed command is NOT tested")
	}
	sb, err := sandbox.New(sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	loop := func(f string) string { return `while :; do printf x >> ` + f + `; done` }
	command := `(setsid sh -c '` + loop("a") + `' &) ; ` + // setsid, orphaned at once
		`sh -c '(sh -c "` + loop("b") + `" &)' ; ` + // a double fork
		`(set -m; sh -c '` + loop("c") + `' &) ; ` + // a process group of its own
		loop("d")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, err := sb.Start(ctx, sandbox.Spec{Home: dir, Shell: "/bin/sh", Command: command}, io.Discard, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = r.Wait()
		_, _ = r.End()
	}()
	if r.Tree() <= 0 {
		t.Skip("SKIPPING: the sandbox gives commands a cgroup here: the tree is not used")
	}
	tree := newProcTree(r.Tree())
	defer tree.close()
	counters := []string{"a", "b", "c", "d"}
	read := func() []int64 {
		var out []int64
		for _, f := range counters {
			var n int64
			if fi, err := os.Stat(filepath.Join(dir, f)); err == nil {
				n = fi.Size()
			}
			out = append(out, n)
		}
		return out
	}
	moving := func(what string) []bool {
		before := read()
		time.Sleep(300 * time.Millisecond)
		after := read()
		var m []bool
		for i := range counters {
			m = append(m, after[i] != before[i])
		}
		t.Logf("%s: %v -> %v", what, before, after)
		return m
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := moving("started")
		if m[0] && m[1] && m[2] && m[3] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the four writers did not all start: %v", m)
		}
	}
	for round := range 3 {
		tree.freeze()
		for i, m := range moving("frozen") {
			if m {
				t.Errorf("round %d: writer %s ran on while the tree was frozen", round, counters[i])
			}
		}
		tree.thaw()
		for i, m := range moving("thawed") {
			if !m {
				t.Errorf("round %d: writer %s did not go on after the thaw", round, counters[i])
			}
		}
	}
	// Paced at a tenth: they run, and they are stopped most of the time.
	if err := tree.pace(0.1); err != nil {
		t.Fatal(err)
	}
	// Paced processes are SCHED_IDLE too: on a busy host they may wait
	// for an idle moment.
	ran := make([]bool, len(counters))
	for deadline := time.Now().Add(30 * time.Second); ; {
		all := true
		for i, m := range moving("paced") {
			ran[i] = ran[i] || m
			all = all && ran[i]
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the writers did not all run within 30 s when paced: %v", ran)
			break
		}
	}
	_ = tree.pace(0)
	tree.close()
	for i, m := range moving("closed") {
		if !m {
			t.Errorf("writer %s was left stopped after close", counters[i])
		}
	}
}
