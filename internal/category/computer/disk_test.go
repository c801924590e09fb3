package computer_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/tool"
)

// smallFS mounts a tmpfs of size bytes for the test and returns its
// path; it skips, saying so, where the test cannot mount (not root, no
// CAP_SYS_ADMIN).
func smallFS(t *testing.T, size string) string {
	t.Helper()
	if d := nobodyDisk(t); d != "" {
		return d // made by the outer run, as root
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Skipf("SKIPPING: a small tmpfs cannot be mounted here (%v): the full-disk tests need root or CAP_SYS_ADMIN", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fill writes zeros to path until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !strings.Contains(err.Error(), "no space left") {
				t.Fatalf("filling: %v", err)
			}
			return
		}
	}
}

// On a full disk, write_file, a growing edit_file and an append of
// another agent's existing 200 KB file fail and leave it whole, with its
// mode; once space is back they succeed.
func TestFullDiskLosesNothing(t *testing.T) {
	root := filepath.Join(smallFS(t, "4m"), "homes")
	// No reserve: the disk is filled by what the worker does not see
	// (here the test), and the write path itself is what is tested.
	c := newCategory(t, computer.Config{Root: root, HomeQuotaBytes: -1, HomeQuotaFiles: -1, DiskReserve: -1})
	h2 := home(t, c, "a2")
	old := strings.Repeat("precious line of a2\n", 10_000) // 200,000 bytes
	path := filepath.Join(h2, "data.txt")
	writeFile(t, path, old)
	if err := os.Chmod(path, 0o751); err != nil {
		t.Fatal(err)
	}
	h1 := home(t, c, agent)
	fill(t, filepath.Join(h1, "filler"))

	bigger := strings.Repeat("new content!\n", 30_000)
	calls := []struct {
		name string
		args map[string]any
	}{
		{computer.WriteFileName, map[string]any{"path": "data.txt", "content": bigger}},
		{computer.WriteFileName, map[string]any{"path": "data.txt", "content": bigger, "append": true}},
		{computer.EditFileName, map[string]any{"path": "data.txt", "old_text": "precious", "new_text": "precious, now longer", "replace_all": true}},
	}
	for _, call := range calls {
		_, err := runCtx(t, context.Background(), c, "a2", call.name, call.args)
		if kindOf(err) != tool.ToolError || !strings.Contains(err.Error(), "no space left") {
			t.Errorf("%s on a full disk: %v, want a tool error saying the disk is full", call.name, err)
		}
		if got := readFile(t, path); got != old {
			t.Fatalf("%s on a full disk left %d bytes, want the old %d whole", call.name, len(got), len(old))
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o751 {
			t.Errorf("mode %v after a failed %s", fi.Mode().Perm(), call.name)
		}
	}
	// No temporary file is left behind.
	ents, _ := os.ReadDir(h2)
	if len(ents) != 1 {
		t.Errorf("a2's home holds %v after the failed writes", ents)
	}

	if err := os.Remove(filepath.Join(h1, "filler")); err != nil {
		t.Fatal(err)
	}
	for i := len(calls) - 1; i >= 0; i-- { // the edit first: it needs the old text
		call := calls[i]
		if _, err := runCtx(t, context.Background(), c, "a2", call.name, call.args); err != nil {
			t.Fatalf("%s once space is back: %v", call.name, err)
		}
	}
	if got := readFile(t, path); got != bigger {
		t.Errorf("after the writes: %d bytes, want the %d written", len(got), len(bigger))
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o751 {
		t.Errorf("mode %v after write_file, want 0751 kept", fi.Mode().Perm())
	}
}

// write_file of a symbolic link to a file in the home replaces the file,
// and the link stays a link.
func TestWriteThroughLinkKeepsTheLink(t *testing.T) {
	c := newCategory(t, computer.Config{})
	h := home(t, c, agent)
	writeFile(t, filepath.Join(h, "real.txt"), "old\n")
	if err := os.Symlink("real.txt", filepath.Join(h, "link")); err != nil {
		t.Fatal(err)
	}
	for _, call := range []struct {
		name string
		args map[string]any
	}{
		{computer.WriteFileName, map[string]any{"path": "link", "content": "new\n"}},
		{computer.EditFileName, map[string]any{"path": "link", "old_text": "new", "new_text": "newer"}},
	} {
		if _, err := run(t, c, call.name, call.args); err != nil {
			t.Fatalf("%s: %v", call.name, err)
		}
	}
	if got := readFile(t, filepath.Join(h, "real.txt")); got != "newer\n" {
		t.Errorf("real.txt %q", got)
	}
	if fi, err := os.Lstat(filepath.Join(h, "link")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link is no longer a link: %v %v", fi, err)
	}
}

// The file tools refuse a write that would take a home over its quota,
// with an error naming the quota and the usage, and leave the file as it
// was; another agent's writes go on.
func TestQuotaFileTools(t *testing.T) {
	c := newCategory(t, computer.Config{HomeQuotaBytes: 1 << 20, HomeQuotaFiles: 50})
	h := home(t, c, agent)
	if _, err := run(t, c, computer.WriteFileName, map[string]any{"path": "a.txt", "content": strings.Repeat("x", 600<<10)}); err != nil {
		t.Fatal(err)
	}
	_, err := run(t, c, computer.WriteFileName, map[string]any{"path": "b.txt", "content": strings.Repeat("y", 600<<10)})
	if kindOf(err) != tool.ToolError || !strings.Contains(err.Error(), "disk quota") || !strings.Contains(err.Error(), "of the 1.0 MiB") {
		t.Fatalf("a write over the quota: %v", err)
	}
	if _, serr := os.Stat(filepath.Join(h, "b.txt")); serr == nil {
		t.Error("b.txt was written over the quota")
	}
	// A growing edit and an append are refused too; the file is whole.
	_, err = run(t, c, computer.EditFileName, map[string]any{"path": "a.txt", "old_text": "x", "new_text": "xx", "replace_all": true})
	if !strings.Contains(fmt.Sprint(err), "disk quota") {
		t.Errorf("a growing edit over the quota: %v", err)
	}
	_, err = run(t, c, computer.WriteFileName, map[string]any{"path": "a.txt", "content": strings.Repeat("z", 500<<10), "append": true})
	if !strings.Contains(fmt.Sprint(err), "disk quota") {
		t.Errorf("an append over the quota: %v", err)
	}
	if got := readFile(t, filepath.Join(h, "a.txt")); got != strings.Repeat("x", 600<<10) {
		t.Errorf("a.txt is %d bytes after refused writes", len(got))
	}
	// Smaller is always allowed; so is another agent.
	if _, err := run(t, c, computer.WriteFileName, map[string]any{"path": "a.txt", "content": "small"}); err != nil {
		t.Errorf("shrinking a file: %v", err)
	}
	if _, err := runCtx(t, context.Background(), c, "a2", computer.WriteFileName, map[string]any{"path": "b.txt", "content": strings.Repeat("y", 600<<10)}); err != nil {
		t.Errorf("another agent: %v", err)
	}
	// The file count: 50 entries at most.
	for i := range 60 {
		_, err = run(t, c, computer.WriteFileName, map[string]any{"path": fmt.Sprintf("f%d", i), "content": "."})
		if err != nil {
			break
		}
	}
	if !strings.Contains(fmt.Sprint(err), "files and directories it may hold") {
		t.Errorf("the 60th file: %v", err)
	}
	if u, _ := c.Usage(agent); u.Files > 50 {
		t.Errorf("usage %+v over the file quota", u)
	}
}

// A command that writes many files, or many bytes, is stopped once its
// home is over the quota, with an error saying so; rm runs while over;
// another agent's commands and writes are untouched.
func TestQuotaCommands(t *testing.T) {
	needSandbox(t)
	c := newCategory(t, computer.Config{HomeQuotaBytes: 8 << 20, HomeQuotaFiles: 500})
	h := home(t, c, agent)
	for _, tt := range []struct{ name, command, usage string }{
		{"files", "mkdir -p many; i=0; while :; do : > many/f$i; i=$((i+1)); done", "files and directories it may hold"},
		{"bytes", "mkdir -p big; i=0; while :; do head -c 1048576 /dev/zero > big/f$i; i=$((i+1)); done", "of the 8.0 MiB it may hold"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := run(t, c, computer.RunCommandName, map[string]any{"command": tt.command, "timeout_seconds": 120})
			if kindOf(err) != tool.ToolError || !strings.Contains(err.Error(), "disk quota") || !strings.Contains(err.Error(), tt.usage) {
				t.Fatalf("a command filling its home: %v\n%s", err, res.Content)
			}
			if d, ok := res.Details.(*computer.CommandDetails); !ok || !d.OverQuota || d.TimedOut {
				t.Errorf("details %+v", res.Details)
			}
			// Over the quota, the file tools refuse to write.
			if _, err := run(t, c, computer.WriteFileName, map[string]any{"path": "more-" + tt.name, "content": "x"}); !strings.Contains(fmt.Sprint(err), "disk quota") {
				t.Errorf("write_file over the quota: %v", err)
			}
			// Another agent notices nothing.
			if _, err := runCtx(t, context.Background(), c, "a2", computer.RunCommandName, map[string]any{"command": "echo hi > hi.txt && cat hi.txt"}); err != nil {
				t.Errorf("another agent's command: %v", err)
			}
			// rm frees space even while over.
			if _, err := run(t, c, computer.RunCommandName, map[string]any{"command": "rm -rf many big"}); err != nil {
				t.Fatalf("rm over the quota: %v", err)
			}
			if _, err := run(t, c, computer.WriteFileName, map[string]any{"path": "more-" + tt.name, "content": "x"}); err != nil {
				t.Errorf("write_file after rm: %v", err)
			}
		})
	}
	_ = h
}

// Two steps that reuse a call id keep both output logs.
func TestOutputLogPerStep(t *testing.T) {
	needSandbox(t)
	c := newCategory(t, computer.Config{})
	h := home(t, c, agent)
	for step := range int64(2) {
		inv, err := tools.Prepare(findTool(t, c, computer.RunCommandName), fmt.Sprintf(`{"command":"echo step %d"}`, step), 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := inv.Run(tools.WithCall(context.Background(), tool.Call{AgentID: agent, TurnID: "t1", Step: step, CallID: "call_1"})); err != nil {
			t.Fatal(err)
		}
	}
	for step := range 2 {
		if got := readFile(t, filepath.Join(h, ".outputs", fmt.Sprintf("t1.%d.call_1.log", step))); got != fmt.Sprintf("step %d\n", step) {
			t.Errorf("step %d's log: %q", step, got)
		}
	}
}

// list_files shows a name with a newline, bytes that are not UTF-8 or
// other ambiguous characters quoted, one line per entry, and each shown
// name reads, writes and edits the file back.
func TestListFilesNamesRoundTrip(t *testing.T) {
	c := newCategory(t, computer.Config{})
	h := home(t, c, agent)
	names := []string{"plain.txt", "evil\nforged.txt  (1 byte)", "\xff\xfe.bin", `"quoted"`, " lead", "tab\there", "a -> b", "caf\u00e9.txt"}
	for i, n := range names {
		writeFile(t, filepath.Join(h, "d", n), fmt.Sprintf("file %d\n", i))
	}
	res, err := run(t, c, computer.ListFilesName, map[string]any{"path": "d"})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(res.Content, "\n"), "\n")
	if len(lines) != len(names) {
		t.Fatalf("%d lines for %d files:\n%s", len(lines), len(names), res.Content)
	}
	for _, l := range lines {
		shown, _, ok := strings.Cut(l, "  (")
		if !ok {
			t.Fatalf("line %q has no size", l)
		}
		if strings.HasPrefix(shown, `"`) {
			// A quoted name's size follows its closing quote.
			shown = l[:strings.LastIndex(l, `"`)+1]
		}
		r, err := run(t, c, computer.ReadFileName, map[string]any{"path": "d/" + shown})
		if strings.HasPrefix(shown, `"`) {
			r, err = run(t, c, computer.ReadFileName, map[string]any{"path": `"d/` + shown[1:]})
		}
		if err != nil || !strings.Contains(r.Content, "file ") {
			t.Errorf("read_file of the listed %s: %v %q", shown, err, r.Content)
		}
	}
	// The non-UTF-8 name, as listed from the home's top, is written back.
	res, err = run(t, c, computer.ListFilesName, map[string]any{"depth": 2})
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(res.Content))
	var bin string
	for sc.Scan() {
		if strings.Contains(sc.Text(), `\xff\xfe`) {
			bin = sc.Text()[:strings.LastIndex(sc.Text(), `"`)+1]
		}
	}
	if bin != `"d/\xff\xfe.bin"` {
		t.Fatalf("the non-UTF-8 name is listed as %q:\n%s", bin, res.Content)
	}
	if _, err := run(t, c, computer.WriteFileName, map[string]any{"path": bin, "content": "back\n"}); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, c, computer.EditFileName, map[string]any{"path": bin, "old_text": "back", "new_text": "round trip"}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(h, "d", "\xff\xfe.bin")); got != "round trip\n" {
		t.Errorf("the file is %q", got)
	}
}
