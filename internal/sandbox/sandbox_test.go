package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/sandbox"
)

// need skips t, loudly, on a machine without bubblewrap. CI always has
// it (.ci/run installs it), so there the tests run.
func need(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("SKIPPING: bwrap is not installed (scripts/test-deps.sh installs it and socat, or apt-get install -y bubblewrap socat); the sandbox is NOT tested on this machine")
	}
}

func newSandbox(t testing.TB, cfg sandbox.Config) *sandbox.Sandbox {
	t.Helper()
	need(t)
	s, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// homeDir is a home as the computer category makes it, in a 0700 root
// of homes, owned by the user commands run as.
func homeDir(t testing.TB, s *sandbox.Sandbox) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "homes")
	h := filepath.Join(root, "a1")
	if err := os.MkdirAll(h, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o700); err != nil {
		t.Fatal(err)
	}
	if uid, gid, ok := s.Owner(); ok {
		if err := os.Chown(h, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

type result struct {
	out      string
	code     int
	sig      syscall.Signal
	left     bool
	oomKills int
	failcnt  int
	notes    []string
	waited   error
}

func run(t testing.TB, ctx context.Context, s *sandbox.Sandbox, home, command string) result {
	t.Helper()
	var out strings.Builder
	w := &sandbox.Watch{W: &out}
	r, err := s.Start(ctx, sandbox.Spec{Home: home, Shell: "/bin/sh", Command: command, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + home}}, w, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	werr := r.Wait()
	end, err := r.End()
	if err != nil {
		t.Error(err)
	}
	res := result{out: out.String(), left: end.Leftovers, oomKills: end.OOMKills, failcnt: end.Failcnt, waited: werr}
	res.code, res.sig, _ = r.Status()
	res.notes = s.Notes(res.sig, w, end)
	return res
}

func TestCheck(t *testing.T) {
	s := newSandbox(t, sandbox.Config{})
	if err := s.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A bwrap that is not there is reported with the way to install it.
	if _, err := sandbox.New(sandbox.Config{Bwrap: "/nonexistent/bwrap"}); err == nil || !strings.Contains(err.Error(), "apt-get install -y bubblewrap") {
		t.Errorf("New with no bwrap: %v", err)
	}
}

func TestBasics(t *testing.T) {
	s := newSandbox(t, sandbox.Config{})
	h := homeDir(t, s)
	res := run(t, context.Background(), s, h, `echo hi; pwd; hostname; echo x > f && cat f; exit 3`)
	if res.out != "hi\n"+h+"\nsandbox\nx\n" || res.code != 3 || res.sig != 0 || res.left {
		t.Errorf("%+v", res)
	}
	res = run(t, context.Background(), s, h, `sleep 1000 & echo started`)
	if !res.left || res.code != 0 {
		t.Errorf("leftovers not seen: %+v", res)
	}
	res = run(t, context.Background(), s, h, `kill -KILL $$`)
	if res.sig != syscall.SIGKILL {
		t.Errorf("signal: %+v", res)
	}
}

// RLIMIT_NPROC set inside the sandbox counts the sandbox's processes
// only (kernel ucounts: the count is per user namespace, or per
// sandbox when the worker is root and commands drop to one user):
// two sandboxes at once each hold more than half the limit.
func TestProcessLimitIsPerSandbox(t *testing.T) {
	const limit = 64
	s := newSandbox(t, sandbox.Config{Limits: sandbox.Limits{Processes: limit}})
	h := homeDir(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	results := make([]result, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each holds 40 sleeps until both hold them: 80 > 64.
			results[i] = run(t, ctx, s, h, fmt.Sprintf(`
				for i in $(seq 40); do sleep 1000 & done
				touch held%d
				while ! test -e held0 || ! test -e held1; do sleep 0.01; done
				echo held all`, i))
		}()
	}
	wg.Wait()
	for i, r := range results {
		if !strings.Contains(r.out, "held all") || strings.Contains(r.out, "fork") {
			t.Errorf("sandbox %d: %+v", i, r)
		}
	}
	// And one sandbox is held to it.
	res := run(t, context.Background(), s, h, `( for i in $(seq 2000); do sleep 1000 & done ) 2>/dev/null; n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo "started $n"`)
	var procs int
	if _, err := fmt.Sscanf(res.out[max(0, strings.Index(res.out, "started")):], "started %d", &procs); err != nil || procs > limit || procs < limit/2 {
		t.Errorf("processes in the sandbox: %d (%v), want at most %d: %q", procs, err, limit, res.out)
	}
}

// /etc is one copy of the allowlist made at New, read-only: what is not
// in it (shadow, a mounted secret) is absent, a --command-ro-bind path
// beneath /etc is added to it, and Close removes the copy.
func TestEtcCopy(t *testing.T) {
	need(t)
	s, err := sandbox.New(sandbox.Config{ReadOnly: []string{"/etc/shells"}})
	if err != nil {
		t.Fatal(err)
	}
	h := homeDir(t, s)
	r := run(t, context.Background(), s, h, `cat /etc/shells >/dev/null && echo shells; test -e /etc/shadow || echo no-shadow; test -s /etc/passwd && echo passwd; echo x >/etc/passwd || echo read-only; grep -c ' /etc ' /proc/self/mountinfo; grep ' /etc ' /proc/self/mountinfo`)
	for _, w := range []string{"shells\n", "no-shadow\n", "passwd\n", "read-only\n", "\n1\n"} {
		if !strings.Contains(r.out, w) {
			t.Errorf("output lacks %q:\n%s", w, r.out)
		}
	}
	// The mount's root names the copy (field 4 of mountinfo).
	_, line, _ := strings.Cut(r.out, "\n1\n")
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(filepath.Base(f[3]), "toolruntime-etc-") {
		t.Fatalf("no copy of /etc is mounted: %q", line)
	}
	copyDir := filepath.Join(os.TempDir(), filepath.Base(f[3]))
	if _, err := os.Stat(copyDir); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(copyDir); !os.IsNotExist(err) {
		t.Errorf("Close left the copy of /etc: %v", err)
	}
}

// The locale reaches the command through the wrapper (the chain before
// it runs without it): the command's environment is what it was given,
// locale and all; a name the shell could not export does not keep the
// command from running (dash passes no such name on, as it does outside
// a sandbox).
func TestCommandLocale(t *testing.T) {
	s := newSandbox(t, sandbox.Config{})
	home := homeDir(t, s)
	var out strings.Builder
	env := []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "LC_ALL=C", "LC_x-y=odd", "LANGUAGE=en it"}
	r, err := s.Start(context.Background(), sandbox.Spec{Home: home, Shell: "/bin/sh", Command: "env | LC_ALL=C sort", Env: env}, &out, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if _, err := r.End(); err != nil {
		t.Error(err)
	}
	for _, want := range []string{"LANG=C.UTF-8\n", "LC_ALL=C\n", "LANGUAGE=en it\n", "PATH=/usr/bin:/bin\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the command's environment lacks %q:\n%s", want, out.String())
		}
	}
}
