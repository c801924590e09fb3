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
