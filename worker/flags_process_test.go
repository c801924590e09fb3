package worker

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A mistyped approval level is refused at start with the level it looks
// like (exit 2); an entry that matches no tool is a warning; the policy
// is stated in one line.
func TestApprovalTypoRefusedAtStart(t *testing.T) {
	t.Parallel()
	addr, _ := freeAddr(t)
	p := startWorker(t, nil, "--listen", addr, "--monitor-port", "0", "--data-dir", t.TempDir(), "--storage", "memory",
		"--approval", "destrutive,write_file")
	if code := p.exit(t); code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", code, p.output())
	}
	if want := `--approval: "destrutive" is not a tool, did you mean the level "destructive"?`; !strings.Contains(p.output(), want) {
		t.Errorf("output lacks %q:\n%s", want, p.output())
	}

	// A tool known at start (ping) is no warning; an unknown name, or a
	// namespace no category has, warns.
	addr, _ = freeAddr(t)
	p = startWorker(t, nil, "--listen", addr, "--monitor-port", "0", "--data-dir", t.TempDir(), "--storage", "memory",
		"--diagnostics", "--approval", "destructive,ping,no_such_tool,diag.*")
	p.waitFor(t, "worker running")
	out := p.output()
	for _, want := range []string{`entry=no_such_tool`, `entry=diag.*`, `msg="approval policy" holds="destructive calls, and calls of ping, no_such_tool, diag.*"`,
		"spans are not exported", "worker running"} {
		if !strings.Contains(out, want) {
			t.Errorf("start log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "entry=ping") {
		t.Errorf("a tool known at start was warned of:\n%s", out)
	}
}

// A second SIGINT quits at once, even when the worker was started with
// SIGINT ignored, as a script's & does.
func TestSecondSignalQuitsWhenStartedIgnoringSIGINT(t *testing.T) {
	t.Parallel()
	addr, _ := freeAddr(t)
	httpAddr, _ := freeAddr(t)
	p := &proc{done: make(chan struct{})}
	// trap '' INT makes SIGINT ignored, and exec keeps it so.
	p.cmd = exec.Command("sh", "-c", `trap '' INT; exec "$0" "$@"`, workerBinary(t), "--listen", addr, "--monitor-port", "0",
		"--data-dir", t.TempDir(), "--diagnostics", "--storage", "memory", "--http-addr", httpAddr, "--grace", "10m")
	p.cmd.Env = []string{"HOME=" + t.TempDir()}
	p.cmd.Stderr, p.cmd.Stdout = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.done })
	p.waitFor(t, "worker running")
	// A call that outlives the test: only a quit at once ends the process.
	startSleep(t, p, addr, httpAddr, 600000)
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, "Ctrl-C again")
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.exit(t); code != 128+int(syscall.SIGINT) {
		t.Errorf("exit %d after the second SIGINT, want %d:\n%s", code, 128+int(syscall.SIGINT), p.output())
	}
	if !strings.Contains(p.output(), "second signal: quitting at once") {
		t.Errorf("the quit is not said:\n%s", p.output())
	}
}

// --storage memory on a data directory whose streams are on file says
// what to do instead of NATS's bare "can not change storage type".
func TestStorageChangeSaysWhatToDo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Port -1: the server picks one as it listens (a port found free
	// before can be taken by another test's process by then).
	const addr = "127.0.0.1:-1"
	a := startWorker(t, nil, "--listen", addr, "--monitor-port", "0", "--data-dir", dir)
	a.waitFor(t, "worker running")
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := a.exit(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, a.output())
	}
	b := startWorker(t, nil, "--listen", addr, "--monitor-port", "0", "--data-dir", dir, "--storage", "memory")
	if code := b.exit(t); code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", code, b.output())
	}
	for _, want := range []string{"--storage memory: the streams and buckets in data directory " + dir + " were made with --storage file",
		"keep --storage file", "another --data-dir"} {
		if !strings.Contains(b.output(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.output())
		}
	}
}

// --storage memory without --data-dir starts clean after a run that kept
// its streams and buckets on file in the default data directory: it reads
// nothing of that run and keeps nothing of its own. The start log says
// which categories are off and the flag that turns each on.
func TestStorageMemoryStartsCleanAfterFileRun(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	env := []string{"XDG_CACHE_HOME=" + cache} // one default data directory for both runs
	dataDir := filepath.Join(cache, "toolruntime", "jetstream")
	const addr = "127.0.0.1:-1"
	stop := func(p *proc) {
		t.Helper()
		p.waitFor(t, "worker running")
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := p.exit(t); code != 0 {
			t.Fatalf("exit %d:\n%s", code, p.output())
		}
	}
	a := startWorker(t, env, "--listen", addr, "--monitor-port", "0")
	stop(a)
	if !strings.Contains(a.output(), "data_dir="+dataDir) {
		t.Fatalf("the first run's store is not in %s:\n%s", dataDir, a.output())
	}
	b := startWorker(t, env, "--listen", addr, "--monitor-port", "0", "--storage", "memory")
	stop(b)
	out := b.output()
	for _, want := range []string{`msg="categories off, each with the flag that turns it on"`, "computer=\"--computer-root <dir>\"", "diagnostics=--diagnostics"} {
		if !strings.Contains(out, want) {
			t.Errorf("start log lacks %q:\n%s", want, out)
		}
	}
	_, after, ok := strings.Cut(out, "data_dir=")
	storeDir, _, _ := strings.Cut(after, "\n")
	if !ok || storeDir == dataDir || storeDir == "" {
		t.Fatalf("the memory run's store is %q, want a directory of its own:\n%s", storeDir, out)
	}
	if _, err := os.Stat(storeDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the memory run's store %s is left after its stop: %v", storeDir, err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "toolruntime-worker.lock")); err != nil {
		t.Errorf("the first run's data directory lost its lock file: %v", err)
	}
}
