package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/sandbox"
)

// TestHelperWorker is the worker of TestWorkerCrash: it starts a command
// that hides sleeps every way it can and waits to be killed.
func TestHelperWorker(t *testing.T) {
	m := os.Getenv("SANDBOX_CRASH_MARKER")
	if m == "" {
		t.Skip("the helper of TestWorkerCrash")
	}
	s := newSandbox(t, sandbox.Config{})
	h := homeDir(t, s)
	r, err := s.Start(context.Background(), sandbox.Spec{Home: h, Shell: "/bin/sh", Env: []string{"PATH=/usr/bin:/bin"},
		Command: fmt.Sprintf(`sleep %[1]s & setsid sleep %[1]s & (nohup sleep %[1]s >/dev/null 2>&1 &) ; wait`, m)}, os.Stdout, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r.Wait()
	t.Fatal("the command ended before the worker was killed")
}

// A worker that dies with SIGKILL (no cleanup runs) leaves no process of
// its commands behind.
func TestWorkerCrash(t *testing.T) {
	need(t)
	m := fmt.Sprintf("1000.%d", time.Now().UnixNano()%1e9)
	helper := exec.Command(os.Args[0], "-test.run", "^TestHelperWorker$", "-test.v")
	// What the killed helper cannot remove (its copy of /etc, its
	// homes) is made beneath this test's directory, which is.
	helper.Env = append(os.Environ(), "SANDBOX_CRASH_MARKER="+m, "TMPDIR="+t.TempDir())
	var out bytes.Buffer
	helper.Stdout, helper.Stderr = &out, &out
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(procsWith(m)) < 3 {
		if time.Now().After(deadline) {
			helper.Process.Kill()
			helper.Wait()
			t.Fatalf("the command's sleeps did not start: %q\n%s", procsWith(m), out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	helper.Wait()
	deadline = time.Now().Add(10 * time.Second)
	for {
		left := procsWith(m)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes outlived the worker: %q", left)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// procsWith are the live processes whose command line holds token.
func procsWith(token string) []string {
	var found []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		if err != nil || !bytes.HasSuffix(b, []byte("\x00"+token+"\x00")) {
			continue
		}
		if st, err := os.ReadFile(d + "/stat"); err == nil {
			i := bytes.LastIndexByte(st, ')')
			if f := strings.Fields(string(st[i+1:])); len(f) > 0 && (f[0] == "Z" || f[0] == "X") {
				continue
			}
		}
		found = append(found, filepath.Base(d)+" "+strings.ReplaceAll(string(b), "\x00", " "))
	}
	return found
}
