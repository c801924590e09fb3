package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The wrapper's ready byte comes with the pid of the process that wrote
// it, as the worker's pid namespace numbers it, and checkProcesses reads
// that process's process limit: the check of the limit the wrapper set
// is the worker's, and it fails when the limit is not the one wanted.
func TestReadyTellsWhoAndItsLimit(t *testing.T) {
	r, w, err := readyPair()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// The shell lowers its own limit, says it is ready on fd 3 and waits
	// for its stdin to end.
	cmd := exec.Command("/bin/sh", "-c", `ulimit -p 77 2>/dev/null || ulimit -u 77; echo r >&3; read x`)
	cmd.ExtraFiles = []*os.File{w}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	ready, pid := readReady(r)
	if !ready || pid != cmd.Process.Pid {
		t.Fatalf("ready %v from pid %d, want true from %d", ready, pid, cmd.Process.Pid)
	}
	if err := checkProcesses(pid, 77); err != nil {
		t.Errorf("the limit the shell set: %v", err)
	}
	if err := checkProcesses(pid, 78); err == nil || !strings.Contains(err.Error(), "cannot set the process limit (77 77") {
		t.Errorf("another limit: %v", err)
	}
	if err := checkProcesses(0, 77); err == nil {
		t.Error("no pid: no error")
	}
}

// A ready byte that never comes (the wrapper died) is not ready.
func TestReadyEOF(t *testing.T) {
	r, w, err := readyPair()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w.Close()
	if ready, _ := readReady(r); ready {
		t.Error("ready after EOF")
	}
}

// A copy of /etc whose worker died (its lock released, nothing removed)
// is removed by the next worker that makes one; a copy in use is not.
func TestEtcCopySwept(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	live, liveLock, err := copyEtc(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer removeEtc(live, liveLock)
	dead, deadLock, err := copyEtc(nil)
	if err != nil {
		t.Fatal(err)
	}
	deadLock.Close() // as the kernel does for a killed worker
	if _, err := os.Stat(filepath.Join(dead, "passwd")); err != nil {
		t.Fatalf("the copy: %v", err)
	}
	next, nextLock, err := copyEtc(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer removeEtc(next, nextLock)
	for _, p := range []string{dead, deadLock.Name()} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s of a dead worker is still there: %v", p, err)
		}
	}
	for _, p := range []string{live, liveLock.Name(), next} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s in use: %v", p, err)
		}
	}
}
