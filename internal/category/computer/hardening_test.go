package computer_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/sandbox"
	"github.com/agentbull/toolruntime/tool"
)

// specials makes, in dir, one file of each kind the file tools must refuse
// and returns their names: a FIFO, a socket, a character device (root
// only), and links inside the home to the FIFO.
func specials(t *testing.T, dir string) []string {
	t.Helper()
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	names := []string{"fifo"}
	// A socket path must be short; listen from inside dir.
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "sock"), Net: "unix"})
	if err == nil {
		t.Cleanup(func() { _ = l.Close() })
		names = append(names, "sock")
	}
	if os.Geteuid() == 0 {
		// /dev/zero's numbers: reading it would never end.
		if err := syscall.Mknod(filepath.Join(dir, "zero"), syscall.S_IFCHR|0o666, 1<<8|5); err == nil {
			names = append(names, "zero")
		}
	}
	if err := os.Symlink("fifo", filepath.Join(dir, "to_fifo")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../fifo", filepath.Join(dir, "d", "fifo_link")); err != nil {
		t.Fatal(err)
	}
	return append(names, "to_fifo", "d/fifo_link")
}

// fileCalls are the calls of the file tools on path that must be refused
// when it is not a regular file.
func fileCalls(path string) []struct {
	tool string
	args map[string]any
} {
	return []struct {
		tool string
		args map[string]any
	}{
		{computer.ReadFileName, map[string]any{"path": path}},
		{computer.ReadFileName, map[string]any{"path": path, "offset": 0, "length": 10}},
		{computer.WriteFileName, map[string]any{"path": path, "content": "x"}},
		{computer.WriteFileName, map[string]any{"path": path, "content": "x", "append": true}},
		{computer.EditFileName, map[string]any{"path": path, "old_text": "a", "new_text": "b"}},
		{computer.ListFilesName, map[string]any{"path": path}},
	}
}

// TestSpecialFilesRefused: a FIFO, a socket, a device, or a link to one,
// is refused by every file tool with a message that says what it is, and
// list_files shows them without opening them.
func TestSpecialFilesRefused(t *testing.T) {
	c := newCategory(t, computer.Config{})
	h := home(t, c, agent)
	for _, name := range specials(t, h) {
		for _, call := range fileCalls(name) {
			t.Run(name+"/"+call.tool, func(t *testing.T) {
				res, err := run(t, c, call.tool, call.args)
				if err == nil {
					t.Fatalf("%s %v succeeded: %q", call.tool, call.args, res.Content)
				}
				if kindOf(err) != tool.ToolError || !strings.Contains(err.Error(), "not a") {
					t.Errorf("error %q (%s), want a tool_error saying it is not a regular file or directory", err, kindOf(err))
				}
			})
		}
	}
	res, err := run(t, c, computer.ListFilesName, map[string]any{"depth": 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"fifo  (named pipe (FIFO))", "to_fifo -> fifo", "d/fifo_link -> ../fifo"} {
		if !strings.Contains(res.Content, want) {
			t.Errorf("the listing lacks %q:\n%s", want, res.Content)
		}
	}
	// The FIFO is still a FIFO: nothing was written over it.
	if fi, err := os.Lstat(filepath.Join(h, "fifo")); err != nil || fi.Mode().Type() != os.ModeNamedPipe {
		t.Errorf("the FIFO became %v, %v", fi, err)
	}
}

// threads is the number of OS threads of this process.
func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads in /proc/self/status")
	return 0
}

// TestFIFOCallsFreeTheirThreads: 300 calls at once on a FIFO (with no
// peer: an open without O_NONBLOCK would wait for ever in the kernel, one
// pinned OS thread each, until the runtime dies of thread exhaustion) all
// end with an error, and the process keeps about the threads it had.
func TestFIFOCallsFreeTheirThreads(t *testing.T) {
	c := newCategory(t, computer.Config{})
	h := home(t, c, agent)
	if err := syscall.Mkfifo(filepath.Join(h, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	calls := fileCalls("pipe")[:5] // read, read bytes, write, append, edit
	before := threads(t)
	const n = 300
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		call := calls[i%len(calls)]
		wg.Go(func() {
			_, err := run(t, c, call.tool, call.args)
			errs <- err
		})
	}
	waitCalls(t, &wg, before)
	close(errs)
	for err := range errs {
		if err == nil || !strings.Contains(err.Error(), "named pipe") {
			t.Fatalf("a call on the FIFO: %v, want it refused as a named pipe", err)
		}
	}
	// A blocked open pins its thread for good: n calls, n threads. Calls
	// that end may leave a few idle threads behind (the runtime keeps
	// them), never one per call.
	after := threads(t)
	t.Logf("threads: %d before, %d after %d calls", before, after, n)
	if after > before+n/2 {
		t.Errorf("threads grew from %d to %d over %d calls on a FIFO", before, after, n)
	}
}

// TestFIFOSwappedIn: the path turns from a regular file into a FIFO and
// back while calls run, so that some opens find a FIFO where the check
// before found a file. Each call still ends (O_NONBLOCK, then fstat).
func TestFIFOSwappedIn(t *testing.T) {
	c := newCategory(t, computer.Config{})
	h := home(t, c, agent)
	pipe := filepath.Join(h, "pipe")
	if err := os.WriteFile(pipe, []byte("a regular file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var swaps atomic.Int64
	stop := make(chan struct{})
	var swapper sync.WaitGroup
	swapper.Go(func() { swap(t, pipe, stop, &swaps) })
	calls := fileCalls("pipe")[:5]
	before := threads(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	kinds := map[string]int{}
	for w := range 4 {
		wg.Go(func() {
			for i := w; swaps.Load() < 300 && !t.Failed(); i++ {
				_, err := run(t, c, calls[i%len(calls)].tool, calls[i%len(calls)].args)
				switch {
				case err == nil:
				case strings.Contains(err.Error(), "named pipe"):
					err = nil
				case kindOf(err) == tool.ToolError: // a regular file's answer: no match for edit, say
					err = nil
				}
				if err != nil {
					t.Errorf("a call: %v", err)
				}
				mu.Lock()
				kinds[calls[i%len(calls)].tool]++
				mu.Unlock()
			}
		})
	}
	waitCalls(t, &wg, before)
	close(stop)
	swapper.Wait()
	t.Logf("%d swaps; calls %v", swaps.Load(), kinds)
	if after := threads(t); after > before+64 {
		t.Errorf("threads grew from %d to %d", before, after)
	}
}

// waitCalls waits for the calls of wg; should they hang it fails.
func waitCalls(t *testing.T, wg *sync.WaitGroup, threadsBefore int) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute): // a hang guard, not a timing assertion
		t.Fatalf("calls on a FIFO still blocked; threads %d (from %d)", threads(t), threadsBefore)
	}
}

// swap replaces path by a FIFO and a regular file in turn, atomically
// (rename), until stop closes.
func swap(t *testing.T, path string, stop <-chan struct{}, swaps *atomic.Int64) {
	tmp := path + ".next"
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		var err error
		if i%2 == 0 {
			err = syscall.Mkfifo(tmp, 0o644)
		} else {
			err = os.WriteFile(tmp, []byte("a regular file\n"), 0o644)
		}
		if err == nil {
			err = os.Rename(tmp, path)
		}
		if err != nil {
			t.Error(err)
			return
		}
		swaps.Add(1)
	}
}

// TestOutputLogNotAFIFO: a FIFO (or a hard link) planted under the name
// of a call's output log does not hold run_command; the output still
// comes back and what was planted is untouched.
func TestOutputLogNotAFIFO(t *testing.T) {
	c := newCategory(t, computer.Config{})
	h := home(t, c, agent)
	a2 := home(t, c, "a2")
	writeFile(t, filepath.Join(a2, "precious.txt"), "a2's data\n")
	if err := os.MkdirAll(filepath.Join(h, ".outputs"), 0o700); err != nil {
		t.Fatal(err)
	}
	// The name logName gives the call of runCtx: <turn>.<step>.<call>.log.
	logPath := filepath.Join(h, ".outputs", "t1.0.call_run_command.log")
	for _, plant := range []string{"fifo", "hard link"} {
		t.Run(plant, func(t *testing.T) {
			_ = os.Remove(logPath)
			var err error
			if plant == "fifo" {
				err = syscall.Mkfifo(logPath, 0o644)
			} else {
				err = os.Link(filepath.Join(a2, "precious.txt"), logPath)
			}
			if err != nil {
				t.Fatal(err)
			}
			res, err := run(t, c, computer.RunCommandName, map[string]any{"command": "echo still here"})
			if err != nil {
				t.Fatal(err)
			}
			d := res.Details.(*computer.CommandDetails)
			if !strings.Contains(res.Content, "still here") || d.LogPath != "" || d.LogError == "" {
				t.Errorf("content %q, log %q, log error %q", res.Content, d.LogPath, d.LogError)
			}
			if got := readFile(t, filepath.Join(a2, "precious.txt")); got != "a2's data\n" {
				t.Errorf("the other home's file is now %q", got)
			}
		})
	}
}

// TestHardLinksRefused: a hard link from a1's home to a2's file (made by
// anyone before the sandbox existed) neither reads nor changes a2's file.
func TestHardLinksRefused(t *testing.T) {
	c := newCategory(t, computer.Config{})
	a1, a2 := home(t, c, "a1"), home(t, c, "a2")
	secret := filepath.Join(a2, "secret.txt")
	writeFile(t, secret, "a2 secret line\n")
	if err := os.Link(secret, filepath.Join(a1, "linked.txt")); err != nil {
		t.Fatal(err)
	}
	for _, call := range fileCalls("linked.txt")[:5] {
		t.Run(call.tool, func(t *testing.T) {
			res, err := run(t, c, call.tool, call.args)
			if err == nil || !strings.Contains(err.Error(), "hard link") || !strings.Contains(err.Error(), "Copy it first") {
				t.Fatalf("%s %v: %q, %v; want a refusal that names the hard link", call.tool, call.args, res.Content, err)
			}
			if strings.Contains(res.Content+err.Error(), "a2 secret") {
				t.Errorf("the answer leaks a2's file: %q %v", res.Content, err)
			}
			if got := readFile(t, secret); got != "a2 secret line\n" {
				t.Fatalf("a2's file is now %q", got)
			}
		})
	}
	// A file of its own, with one name, is written and edited as usual.
	if _, err := run(t, c, computer.WriteFileName, map[string]any{"path": "own.txt", "content": "mine\n"}); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, c, computer.EditFileName, map[string]any{"path": "own.txt", "old_text": "mine", "new_text": "still mine"}); err != nil {
		t.Fatal(err)
	}
}

// TestHugeEditRefused: replace_all of a short text by a long one in a file
// of a million occurrences would make a file of gigabytes. It is refused
// from the computed size, before the result is built: the process does
// not allocate anything near it, and the file is unchanged.
func TestHugeEditRefused(t *testing.T) {
	c := newCategory(t, computer.Config{})
	h := home(t, c, agent)
	content := strings.Repeat("a", 2<<20) // 2 MiB, 2 Mi occurrences of "a"
	writeFile(t, filepath.Join(h, "big.txt"), content)
	newText := strings.Repeat("x", 2<<10) // the result: 4 GiB
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := run(t, c, computer.EditFileName, map[string]any{"path": "big.txt", "old_text": "a", "new_text": newText, "replace_all": true})
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "over the") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("edit: %v, want a refusal over the limit", err)
	}
	// The file twice (bytes and string) and the call's own overhead.
	grown := after.TotalAlloc - before.TotalAlloc
	t.Logf("the refused edit allocated %.1f MiB", float64(grown)/(1<<20))
	if grown > 32<<20 {
		t.Errorf("the refused edit allocated %d MiB", grown>>20)
	}
	if readFile(t, filepath.Join(h, "big.txt")) != content {
		t.Error("the file changed")
	}
	// An edit that fits still works, and the limit counts the result.
	small := newCategory(t, computer.Config{MaxFileBytes: 100})
	sh := home(t, small, agent)
	writeFile(t, filepath.Join(sh, "f.txt"), strings.Repeat("ab", 10))
	if _, err := run(t, small, computer.EditFileName, map[string]any{"path": "f.txt", "old_text": "a", "new_text": "xyz", "replace_all": true}); err != nil {
		t.Fatalf("an edit to 40 bytes under a 100-byte limit: %v", err)
	}
	if _, err := run(t, small, computer.EditFileName, map[string]any{"path": "f.txt", "old_text": "xyz", "new_text": "01234567890123456789", "replace_all": true}); err == nil {
		t.Fatal("an edit to 210 bytes under a 100-byte limit succeeded")
	}
	if got := readFile(t, filepath.Join(sh, "f.txt")); got != strings.Repeat("xyzb", 10) {
		t.Errorf("f.txt = %q", got)
	}
}

func TestEditedSizeOverflow(t *testing.T) {
	for _, tt := range []struct {
		n, count, old, new int
		want               int64
		ok                 bool
	}{
		{10, 2, 1, 3, 14, true},
		{10, 2, 3, 1, 6, true},
		{10, 0, 1, 1 << 20, 10, true},
		{math.MaxInt, 2, 1, math.MaxInt, 0, false},
		{1 << 40, 1 << 30, 1, 1 << 34, 0, false},
		{0, 1, 1, math.MaxInt, math.MaxInt - 1, true},
		{1, 2, 0, math.MaxInt, 0, false},
	} {
		got, ok := computer.EditedSize(tt.n, tt.count, tt.old, tt.new)
		if got != tt.want || ok != tt.ok {
			t.Errorf("editedSize(%d, %d, %d, %d) = %d, %v; want %d, %v", tt.n, tt.count, tt.old, tt.new, got, ok, tt.want, tt.ok)
		}
	}
}

// logTo is a logger whose lines the test reads.
func logTo(buf *bytes.Buffer) *slog.Logger {
	var mu sync.Mutex
	return slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), nil))
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestHomeRepaired: whatever was put in place of a home (a link out, a
// link to another home, a file, a FIFO) is moved aside under a name no
// agent id can have, with a log line; the agent gets a fresh private home
// and nothing the link pointed at is touched. A home whose mode was
// changed gets 0700 back.
func TestHomeRepaired(t *testing.T) {
	for _, plant := range []string{"link out", "link to another home", "file", "fifo", "mode 000", "mode 777"} {
		t.Run(plant, func(t *testing.T) {
			tmp := t.TempDir()
			var logs bytes.Buffer
			c := newCategory(t, computer.Config{Root: filepath.Join(tmp, "homes"), Logger: logTo(&logs)})
			a2 := home(t, c, "a2")
			writeFile(t, filepath.Join(a2, "a2.txt"), "a2's\n")
			writeFile(t, filepath.Join(tmp, "elsewhere", "x.txt"), "elsewhere\n")
			a1 := filepath.Join(c.Root(), "a1")
			var err error
			switch plant {
			case "link out":
				err = os.Symlink(filepath.Join(tmp, "elsewhere"), a1)
			case "link to another home":
				err = os.Symlink("a2", a1)
			case "file":
				err = os.WriteFile(a1, []byte("not a home"), 0o644)
			case "fifo":
				err = syscall.Mkfifo(a1, 0o644)
			case "mode 000", "mode 777":
				home(t, c, "a1")
				writeFile(t, filepath.Join(a1, "kept.txt"), "kept\n")
				mode := os.FileMode(0)
				if plant == "mode 777" {
					mode = 0o777
				}
				err = os.Chmod(a1, mode)
			}
			if err != nil {
				t.Fatal(err)
			}
			res, err := run(t, c, computer.ListFilesName, map[string]any{})
			if err != nil {
				t.Fatalf("list_files after %s: %v", plant, err)
			}
			if strings.Contains(res.Content, "x.txt") || strings.Contains(res.Content, "a2.txt") {
				t.Errorf("the listing reaches what was planted: %q", res.Content)
			}
			fi, err := os.Lstat(a1)
			if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
				t.Fatalf("a1 is now %v, %v; want a 0700 directory", fi.Mode(), err)
			}
			if readFile(t, filepath.Join(tmp, "elsewhere", "x.txt")) != "elsewhere\n" || readFile(t, filepath.Join(a2, "a2.txt")) != "a2's\n" {
				t.Error("what the link pointed at changed")
			}
			if strings.HasPrefix(plant, "mode") {
				if !strings.Contains(res.Content, "kept.txt") || !strings.Contains(logs.String(), "0700 again") {
					t.Errorf("listing %q, logs %q", res.Content, logs.String())
				}
				return
			}
			if res.Content != "(empty directory)\n" {
				t.Errorf("the new home lists %q", res.Content)
			}
			aside, _ := filepath.Glob(a1 + ".moved-*")
			if len(aside) != 1 {
				t.Fatalf("moved aside: %v", aside)
			}
			if fi, err := os.Lstat(aside[0]); err != nil || fi.IsDir() {
				t.Errorf("what was moved aside is %v, %v", fi, err)
			}
			if !strings.Contains(logs.String(), "moved aside") || !strings.Contains(logs.String(), filepath.Base(aside[0])) {
				t.Errorf("no log line names the move: %q", logs.String())
			}
			// It is repaired for good: the next call finds the same home.
			if _, err := run(t, c, computer.WriteFileName, map[string]any{"path": "n.txt", "content": "n"}); err != nil {
				t.Fatal(err)
			}
			if readFile(t, filepath.Join(a1, "n.txt")) != "n" {
				t.Error("the write went elsewhere")
			}
		})
	}
}

// TestHomesRootMode: the homes' root is created 0700, and one open to
// others (a volume made 0777) is tightened at start with a log line.
func TestHomesRootMode(t *testing.T) {
	fresh := filepath.Join(t.TempDir(), "homes")
	newCategory(t, computer.Config{Root: fresh})
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("a new root is %v, %v; want 0700", fi.Mode(), err)
	}
	open := filepath.Join(t.TempDir(), "homes")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	var logs bytes.Buffer
	c := newCategory(t, computer.Config{Root: open, Logger: logTo(&logs)})
	if fi, err := os.Stat(open); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("a 0777 root is now %v, %v; want 0700", fi.Mode(), err)
	}
	if !strings.Contains(logs.String(), "now 0700") {
		t.Errorf("logs %q", logs.String())
	}
	// Homes are private and made by the worker, whatever the umask said.
	if fi, err := os.Stat(home(t, c, "a9")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("home %v, %v", fi.Mode(), err)
	}
}

// TestHomeRepairRace: many calls of one agent at once on a home replaced
// by a link all work, and exactly one copy is moved aside.
func TestHomeRepairRace(t *testing.T) {
	tmp := t.TempDir()
	c := newCategory(t, computer.Config{Root: filepath.Join(tmp, "homes")})
	if err := os.Symlink(tmp, filepath.Join(c.Root(), "a1")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Go(func() {
			_, err := runCtx(t, context.Background(), c, "a1", computer.WriteFileName, map[string]any{"path": fmt.Sprintf("f%d", i), "content": "x"})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if aside, _ := filepath.Glob(filepath.Join(c.Root(), "a1.moved-*")); len(aside) != 1 {
		t.Errorf("moved aside: %v", aside)
	}
	if files, _ := filepath.Glob(filepath.Join(c.Root(), "a1", "f*")); len(files) != 20 {
		t.Errorf("the home has %d of the 20 files", len(files))
	}
}

// A command cannot lock run_command out of its home by putting something
// else in the place of the directories the worker uses there (.tmp, the
// TMPDIR of commands; .outputs, where full outputs are saved): the next
// call moves it aside and runs, and its output is saved again.
func TestWorkDirsRepaired(t *testing.T) {
	needSandbox(t)
	for _, plant := range []string{
		"rm -rf .tmp && echo x > .tmp",
		"rm -rf .tmp && ln -s /etc .tmp",
		"rm -rf .outputs && echo x > .outputs",
		"rm -rf .outputs && ln -s /etc .outputs",
		"rm -rf .outputs && ln -s ../a2 .outputs",
		"mkdir -p .outputs && chmod 000 .outputs", // made at a command's first output
		"chmod 000 .tmp",
	} {
		t.Run(plant, func(t *testing.T) {
			c := newCategory(t, computer.Config{})
			home(t, c, "a2")
			if out := probe(t, c, plant+" && echo planted"); !strings.Contains(out, "planted") {
				t.Fatalf("planting: %s", out)
			}
			res, err := run(t, c, computer.RunCommandName, map[string]any{"command": "test -d $TMPDIR && echo fine"})
			if err != nil || !strings.Contains(res.Content, "fine") {
				t.Fatalf("the next command: %q, %v", res.Content, err)
			}
			d := res.Details.(*computer.CommandDetails)
			if d.LogPath == "" || d.LogError != "" {
				t.Fatalf("the output was not saved: %+v", d)
			}
			if got := readFile(t, filepath.Join(c.Root(), agent, d.LogPath)); !strings.Contains(got, "fine") {
				t.Errorf("saved output %q", got)
			}
			aside, _ := filepath.Glob(filepath.Join(c.Root(), agent, ".*.moved-*"))
			want := 1 // what was planted, moved aside
			if strings.Contains(plant, "chmod") {
				want = 0 // a directory: its mode is set back
			}
			if len(aside) != want {
				t.Errorf("moved aside: %v", aside)
			}
		})
	}
}

// A root worker gives what the file tools make to the sandbox's user when
// it makes it, so a command can change it; a home from before (root's
// files in it) is walked once, not before every command.
func TestOwnedAtCreation(t *testing.T) {
	needSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("the worker is not root: files are the worker's own, which is the command's user")
	}
	root := filepath.Join(t.TempDir(), "homes")
	old := filepath.Join(root, agent)
	writeFile(t, filepath.Join(old, "old", "f.txt"), "from before\n")
	c := newCategory(t, computer.Config{Root: root})
	if _, err := run(t, c, computer.WriteFileName, map[string]any{"path": "d/e/new.txt", "content": "new\n"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".", "old", "old/f.txt", "d", "d/e", "d/e/new.txt"} {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(old, p), &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != sandbox.DefaultUID || st.Gid != sandbox.DefaultUID {
			t.Errorf("%s belongs to %d:%d", p, st.Uid, st.Gid)
		}
	}
	out := probe(t, c, `echo more >> d/e/new.txt && echo more >> old/f.txt && mkdir d/e/sub && rm -r d && echo changed`)
	if !strings.Contains(out, "changed") {
		t.Fatalf("the command cannot change what the file tools made: %s", out)
	}
	// The home was walked once: a root file put there by hand now stays
	// root's (the walk it would take costs every command of a big home).
	writeFile(t, filepath.Join(old, "by-hand.txt"), "root's\n")
	probe(t, c, `true`)
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(old, "by-hand.txt"), &st); err != nil || st.Uid != 0 {
		t.Errorf("the home was walked again: %d, %v", st.Uid, err)
	}
	// A home made anew (moved aside) is walked again.
	if err := os.Rename(old, filepath.Join(root, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(old, "again.txt"), "root's\n")
	probe(t, c, `true`)
	if err := syscall.Lstat(filepath.Join(old, "again.txt"), &st); err != nil || st.Uid != sandbox.DefaultUID {
		t.Errorf("a new home was not walked: %d, %v", st.Uid, err)
	}
}

// A root worker's chowns never reach outside the home: a command of the
// same agent swaps the directories the file tools create into for links
// to a host directory while write_file creates files and directories in
// them, and a new home is walked while links in it point out.
func TestOwnershipRace(t *testing.T) {
	// Its own homes and host directory; it waits on the commands of its
	// loop, so it overlaps the CPU-bound media tests.
	t.Parallel()
	needSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("the worker is not root: it changes no owner")
	}
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "f.txt"), "root's\n")
	c := newCategory(t, computer.Config{})
	home(t, c, agent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		probe(t, c, `i=0; while [ $i -lt 200 ]; do mkdir -p d/e; mv d d2; ln -s `+outside+` d; rm d; ln -s ../../.. d; rm d; rm -rf d2; i=$((i+1)); done; echo swapped`)
	}()
	for i := 0; ; i++ {
		select {
		case <-done:
		default:
			_, _ = run(t, c, computer.WriteFileName, map[string]any{"path": fmt.Sprintf("d/e/n%d/f.txt", i%7), "content": "x"})
			_, _ = run(t, c, computer.WriteFileName, map[string]any{"path": "d/f.txt", "content": "x"})
			continue
		}
		break
	}
	err := filepath.WalkDir(outside, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		if st.Uid != 0 {
			t.Errorf("%s outside the home was given to %d", p, st.Uid)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat("/etc/passwd", &st); err != nil || st.Uid != 0 {
		t.Errorf("/etc/passwd: %d, %v", st.Uid, err)
	}
}

// A path thousands of directories deep is refused before any is made:
// each component costs a lookup of every one above it, so making them
// would hold the worker's CPU for a time that grows with the square of
// the depth (seconds for a few thousand), which no deadline stops.
func TestDeepPathRefused(t *testing.T) {
	c := newCategory(t, computer.Config{})
	h := home(t, c, agent)
	for _, p := range []string{strings.Repeat("a/", 4000) + "f", strings.Repeat("b", 5000)} {
		for _, name := range []string{computer.WriteFileName, computer.ReadFileName, computer.ListFilesName} {
			args := map[string]any{"path": p}
			if name == computer.WriteFileName {
				args["content"] = "x"
			}
			_, err := run(t, c, name, args)
			if kindOf(err) != tool.InvalidArguments || !strings.Contains(err.Error(), "longer than the file tools take") {
				t.Errorf("%s of a %d-byte path: %v", name, len(p), err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(h, "a")); !os.IsNotExist(err) {
		t.Errorf("a directory was made: %v", err)
	}
	if _, err := run(t, c, computer.WriteFileName, map[string]any{"path": strings.Repeat("a/", 200) + "f", "content": "x"}); err != nil {
		t.Errorf("a path 200 deep: %v", err)
	}
}
