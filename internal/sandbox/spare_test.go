package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/sandbox"
)

// A command reaches its shell byte for byte through the spare's pipe:
// backslashes, leading blanks, empty and CR lines, trailing newlines,
// quotes, and the longest command run_command takes (128 KiB).
func TestSpareCommandExact(t *testing.T) {
	s := newSandbox(t, sandbox.Config{})
	h := homeDir(t, s)
	ctx := context.Background()
	body := "  lead\\ing \\n back\\\\slash\n\n\r\n'q' \"d\" $HOME `x`\n\n\n"
	big := strings.Repeat("0123456789abcdef\n", (128<<10)/17-8)
	for name, text := range map[string]string{"odd": body, "big": big, "one long line": strings.Repeat("y", 120<<10)} {
		if err := os.WriteFile(filepath.Join(h, "want"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		// The command carries the text as one quoted word and writes
		// it back with printf %s.
		cmd := "printf %s '" + strings.ReplaceAll(text, "'", `'\''`) + "' >got && cmp -s got want && echo same"
		for range 2 { // cold, then the spare
			res := run(t, ctx, s, h, cmd)
			if res.code != 0 || res.out != "same\n" {
				t.Fatalf("%s: %+v", name, res)
			}
		}
	}
	// The empty command is a command: the shell runs nothing.
	if res := run(t, ctx, s, h, ""); res.code != 0 || res.out != "" {
		t.Errorf("empty command: %+v", res)
	}
}

// A spare is one command's: the next command of the home has its own
// /tmp and processes, and a home removed and made again is the new
// one, not the directory the spare bound.
func TestSpareIsFresh(t *testing.T) {
	s := newSandbox(t, sandbox.Config{})
	h := homeDir(t, s)
	ctx := context.Background()
	spec := sandbox.Spec{Home: h, Shell: "/bin/sh", Env: []string{"PATH=/usr/bin:/bin", "HOME=" + h}}
	if res := run(t, ctx, s, h, `echo secret >/tmp/m; sleep 1000 & echo ok`); res.code != 0 || !res.left {
		t.Fatalf("%+v", res)
	}
	if !s.WaitSpare(spec, 30*time.Second) {
		t.Fatal("no spare was made for the home")
	}
	if res := run(t, ctx, s, h, `test ! -e /tmp/m && ps -e -o pid= | wc -l`); res.code != 0 || strings.TrimSpace(res.out) == "" {
		t.Fatalf("the spare saw the last command's /tmp: %+v", res)
	}
	if !s.WaitSpare(spec, 30*time.Second) {
		t.Fatal("no spare was made for the home")
	}
	fi, _ := os.Stat(h)
	if err := os.RemoveAll(h); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(h, fi.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
	if uid, gid, ok := s.Owner(); ok {
		if err := os.Chown(h, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if res := run(t, ctx, s, h, `echo new >here`); res.code != 0 {
		t.Fatalf("%+v", res)
	}
	if b, err := os.ReadFile(filepath.Join(h, "here")); err != nil || string(b) != "new\n" {
		t.Errorf("the command wrote into the removed home: %q %v", b, err)
	}
	// Another home never gets this home's spare.
	other := homeDir(t, s)
	if res := run(t, ctx, s, other, `pwd; ls `+h+` 2>&1 | head -1`); !strings.HasPrefix(res.out, other+"\n") || strings.Contains(res.out, "here") {
		t.Errorf("another home's command: %+v", res)
	}
}

// burst runs `true` in home h back to back until its pool keeps at least
// two spares (a command found none ready), then waits until two are.
func burst(t *testing.T, s *sandbox.Sandbox, h string) sandbox.Spec {
	t.Helper()
	spec := sandbox.Spec{Home: h, Shell: "/bin/sh", Env: []string{"PATH=/usr/bin:/bin", "HOME=" + h}}
	for i := 0; ; i++ {
		if _, _, want := s.SpareDepth(spec); want >= 2 {
			break
		}
		if i == 50 {
			t.Fatal("50 commands back to back never found their home without a spare ready")
		}
		if res := run(t, context.Background(), s, h, "true"); res.code != 0 {
			t.Fatalf("%+v", res)
		}
	}
	if !s.WaitDepth(spec, 2, 30*time.Second) {
		r, f, w := s.SpareDepth(spec)
		t.Fatalf("the home's pool did not make a second spare: ready %d, being made %d, depth %d", r, f, w)
	}
	return spec
}

// Commands of a home that come faster than its spare is made raise its
// depth: it keeps more than one spare. A pause ends the burst: the depth
// goes back to one, and the spares beyond it are ended.
func TestSpareDepth(t *testing.T) {
	s := newSandbox(t, sandbox.Config{})
	s.SetExtraIdle(time.Hour)
	h := homeDir(t, s)
	spec := burst(t, s, h)
	// The gap depends on the last making: none may end during it.
	for {
		if _, filling, _ := s.SpareDepth(spec); filling == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(s.SpareGap(spec) + 100*time.Millisecond)
	if res := run(t, context.Background(), s, h, "true"); res.code != 0 {
		t.Fatalf("%+v", res)
	}
	if ready, filling, want := s.SpareDepth(spec); want != 1 || ready+filling != 1 {
		t.Errorf("after a pause: ready %d, being made %d, depth %d; want one spare and depth 1", ready, filling, want)
	}
}

// The spares' budget (Config.Spares) is shared fairly: one home's burst
// holds at most half of it, and a home's first spare ends another's
// extra one when the budget is spent. Each home's spares serve it only.
func TestSpareBudget(t *testing.T) {
	s := newSandbox(t, sandbox.Config{Spares: 4})
	s.SetExtraIdle(time.Hour)
	a := homeDir(t, s)
	specA := burst(t, s, a)
	if n := s.SparesHeld(); n != 2 {
		t.Fatalf("a burst of one home holds %d spares of 4, want 2 (half)", n)
	}
	for i := range 2 {
		h := homeDir(t, s)
		if res := run(t, context.Background(), s, h, "true"); res.code != 0 {
			t.Fatalf("%+v", res)
		}
		spec := sandbox.Spec{Home: h, Shell: "/bin/sh", Env: []string{"PATH=/usr/bin:/bin", "HOME=" + h}}
		if !s.WaitSpare(spec, 30*time.Second) {
			t.Fatalf("home %d got no spare with %d of 4 held", i, s.SparesHeld())
		}
	}
	if n := s.SparesHeld(); n != 4 {
		t.Fatalf("%d spares held, want 4", n)
	}
	if ready, _, _ := s.SpareDepth(specA); ready != 2 {
		t.Fatalf("the bursting home has %d spares ready, want 2", ready)
	}
	// The budget is spent: the next home's first spare takes the
	// bursting home's second.
	d := homeDir(t, s)
	if res := run(t, context.Background(), s, d, `pwd`); res.code != 0 || res.out != d+"\n" {
		t.Fatalf("%+v", res)
	}
	specD := sandbox.Spec{Home: d, Shell: "/bin/sh", Env: []string{"PATH=/usr/bin:/bin", "HOME=" + d}}
	if !s.WaitSpare(specD, 30*time.Second) {
		t.Fatal("a new home got no spare: the budget went to another home's burst")
	}
	if ready, filling, _ := s.SpareDepth(specA); ready+filling != 1 {
		t.Errorf("the bursting home holds %d spares, want 1 (its extra one ended)", ready+filling)
	}
	if n := s.SparesHeld(); n > 4 {
		t.Errorf("%d spares held, over the bound of 4", n)
	}
}
