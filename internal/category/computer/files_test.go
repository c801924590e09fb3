package computer_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/tool"
)

// hostileSetup is a root with two homes and a file beside the root:
//
//	<tmp>/outside.txt
//	<tmp>/homes/a2/secret.txt
//	<tmp>/homes/a1/notes.txt, sub/, and symbolic links:
//	  link_out -> ../a2        (relative, leads out)
//	  up -> ..                 (the root of the homes)
//	  abs_file -> <tmp>/outside.txt
//	  abs_dir -> /etc
//	  inlink -> notes.txt      (stays inside: allowed)
func hostileSetup(t *testing.T) (c *computer.Category, tmp, a1 string) {
	t.Helper()
	tmp = t.TempDir()
	c = newCategory(t, computer.Config{Root: filepath.Join(tmp, "homes")})
	a1 = home(t, c, "a1")
	a2 := home(t, c, "a2")
	writeFile(t, filepath.Join(tmp, "outside.txt"), "outside secret\n")
	writeFile(t, filepath.Join(a2, "secret.txt"), "a2 secret\n")
	writeFile(t, filepath.Join(a1, "notes.txt"), "hello\n")
	if err := os.Mkdir(filepath.Join(a1, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"link_out": "../a2",
		"up":       "..",
		"abs_file": filepath.Join(tmp, "outside.txt"),
		"abs_dir":  "/etc",
		"inlink":   "notes.txt",
	} {
		if err := os.Symlink(target, filepath.Join(a1, name)); err != nil {
			t.Fatal(err)
		}
	}
	return c, tmp, a1
}

// snapshot lists every file outside a1's home with its content.
func snapshot(t *testing.T, tmp, a1 string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(tmp, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == a1 {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			files[p] = readFile(t, p)
		} else if !d.IsDir() {
			files[p] = d.Type().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestHostilePaths(t *testing.T) {
	c, tmp, a1 := hostileSetup(t)
	secrets := []string{"outside secret", "a2 secret", "root:"}
	outsideAbs := filepath.Join(tmp, "outside.txt")
	tests := []struct {
		name string
		tool string
		args map[string]any
	}{
		{"dot-dot to a sibling home", computer.ReadFileName, map[string]any{"path": "../a2/secret.txt"}},
		{"dot-dot past the root", computer.ReadFileName, map[string]any{"path": "../../outside.txt"}},
		{"dot-dot after a directory", computer.ReadFileName, map[string]any{"path": "sub/../../a2/secret.txt"}},
		{"tilde then dot-dot", computer.ReadFileName, map[string]any{"path": "~/../a2/secret.txt"}},
		{"absolute system file", computer.ReadFileName, map[string]any{"path": "/etc/passwd"}},
		{"absolute outside file", computer.ReadFileName, map[string]any{"path": outsideAbs}},
		{"absolute through the home then out", computer.ReadFileName, map[string]any{"path": a1 + "/../a2/secret.txt"}},
		{"relative link out", computer.ReadFileName, map[string]any{"path": "link_out/secret.txt"}},
		{"link to the root", computer.ReadFileName, map[string]any{"path": "up/a2/secret.txt"}},
		{"absolute link to a file", computer.ReadFileName, map[string]any{"path": "abs_file"}},
		{"absolute link to a directory", computer.ReadFileName, map[string]any{"path": "abs_dir/passwd"}},
		{"NUL byte", computer.ReadFileName, map[string]any{"path": "notes.txt\x00../../outside.txt"}},
		{"byte range through a link", computer.ReadFileName, map[string]any{"path": "abs_file", "offset": 0, "length": 10}},
		{"list a sibling home", computer.ListFilesName, map[string]any{"path": "../a2"}},
		{"list through a link", computer.ListFilesName, map[string]any{"path": "link_out"}},
		{"list /etc", computer.ListFilesName, map[string]any{"path": "/etc"}},
		{"list through the root link", computer.ListFilesName, map[string]any{"path": "up"}},
		{"write into a sibling home", computer.WriteFileName, map[string]any{"path": "../a2/planted.txt", "content": "x"}},
		{"write through a relative link", computer.WriteFileName, map[string]any{"path": "link_out/planted.txt", "content": "x"}},
		{"write over an outside file through a link", computer.WriteFileName, map[string]any{"path": "abs_file", "content": "overwritten"}},
		{"append to an outside file through a link", computer.WriteFileName, map[string]any{"path": "abs_file", "content": "more", "append": true}},
		{"write an absolute outside path", computer.WriteFileName, map[string]any{"path": filepath.Join(tmp, "planted.txt"), "content": "x"}},
		{"write a directory chain out", computer.WriteFileName, map[string]any{"path": "up/a2/new/planted.txt", "content": "x"}},
		{"edit a sibling's file", computer.EditFileName, map[string]any{"path": "../a2/secret.txt", "old_text": "secret", "new_text": "gone"}},
		{"edit through a link", computer.EditFileName, map[string]any{"path": "abs_file", "old_text": "secret", "new_text": "gone"}},
		{"edit through a directory link", computer.EditFileName, map[string]any{"path": "link_out/secret.txt", "old_text": "secret", "new_text": "gone"}},
	}
	before := snapshot(t, tmp, a1)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := run(t, c, tt.tool, tt.args)
			if err == nil {
				t.Fatalf("%s %v succeeded: %q", tt.tool, tt.args, res.Content)
			}
			if k := kindOf(err); k != tool.InvalidArguments && k != tool.ToolError {
				t.Errorf("kind = %q (%v), want invalid_arguments or tool_error", k, err)
			}
			for _, s := range secrets {
				if strings.Contains(res.Content, s) || strings.Contains(err.Error(), s) {
					t.Errorf("the answer leaks %q: %q / %v", s, res.Content, err)
				}
			}
			if after := snapshot(t, tmp, a1); !mapsEqual(before, after) {
				t.Errorf("files outside the home changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Spellings that stay inside the home work.
func TestPathsInsideTheHome(t *testing.T) {
	c, _, a1 := hostileSetup(t)
	for _, p := range []string{"notes.txt", "./notes.txt", "~/notes.txt", "sub/../notes.txt", filepath.Join(a1, "notes.txt"), "inlink"} {
		res, err := run(t, c, computer.ReadFileName, map[string]any{"path": p})
		if err != nil || !strings.Contains(res.Content, "hello") {
			t.Errorf("read_file %q = %q, %v", p, res.Content, err)
		}
	}
	if _, err := run(t, c, computer.WriteFileName, map[string]any{"path": filepath.Join(a1, "deep/er/new.txt"), "content": "new\n"}); err != nil {
		t.Fatalf("write by absolute path inside the home: %v", err)
	}
	if got := readFile(t, filepath.Join(a1, "deep/er/new.txt")); got != "new\n" {
		t.Errorf("written %q", got)
	}
	// A write through a link that stays inside writes its target.
	if _, err := run(t, c, computer.WriteFileName, map[string]any{"path": "inlink", "content": "via link\n"}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(a1, "notes.txt")); got != "via link\n" {
		t.Errorf("notes.txt = %q", got)
	}
}

func TestHomeCreatedPrivate(t *testing.T) {
	c := newCategory(t, computer.Config{})
	dir := home(t, c, "fresh")
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("home mode = %v, want 0700", fi.Mode().Perm())
	}
	// Every agent gets its own home.
	if _, err := runCtx(t, context.Background(), c, "other", computer.WriteFileName, map[string]any{"path": "f", "content": "other's"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "f")); !os.IsNotExist(err) {
		t.Errorf("agent other wrote into fresh's home: %v", err)
	}
}

func TestListFiles(t *testing.T) {
	c := newCategory(t, computer.Config{})
	h := home(t, c, agent)
	writeFile(t, filepath.Join(h, "b.txt"), "12345")
	writeFile(t, filepath.Join(h, "a", "deep", "c.txt"), "x")
	if err := os.Symlink("b.txt", filepath.Join(h, "link")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args         map[string]any
		want, absent []string
	}{
		{map[string]any{}, []string{"a/\n", "b.txt  (5 bytes)\n", "link -> b.txt\n"}, []string{"deep"}},
		{map[string]any{"depth": 3}, []string{"a/\n", "a/deep/\n", "a/deep/c.txt  (1 byte)\n"}, nil},
		{map[string]any{"path": "a"}, []string{"deep/\n"}, []string{"b.txt", "c.txt"}},
		{map[string]any{"path": "a/deep"}, []string{"c.txt  (1 byte)\n"}, nil},
	}
	for _, tt := range tests {
		res, err := run(t, c, computer.ListFilesName, tt.args)
		if err != nil {
			t.Fatalf("list %v: %v", tt.args, err)
		}
		for _, w := range tt.want {
			if !strings.Contains(res.Content, w) {
				t.Errorf("list %v lacks %q:\n%s", tt.args, w, res.Content)
			}
		}
		for _, a := range tt.absent {
			if strings.Contains(res.Content, a) {
				t.Errorf("list %v has %q:\n%s", tt.args, a, res.Content)
			}
		}
	}
	if _, err := run(t, c, computer.ListFilesName, map[string]any{"path": "b.txt"}); err == nil || !strings.Contains(err.Error(), "read_file") {
		t.Errorf("listing a file: %v", err)
	}
	if _, err := run(t, c, computer.ListFilesName, map[string]any{"path": "nope"}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("listing a missing directory: %v", err)
	}
}

func TestListFilesCapped(t *testing.T) {
	c := newCategory(t, computer.Config{OutputBudget: computer.MinOutputBudget})
	h := home(t, c, agent)
	for i := range 500 {
		writeFile(t, filepath.Join(h, fmt.Sprintf("file-with-a-long-name-%04d.txt", i)), "")
	}
	res, err := run(t, c, computer.ListFilesName, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Content) > computer.MinOutputBudget || !strings.Contains(res.Content, "elided") {
		t.Errorf("listing is %d bytes (budget %d):\n%s", len(res.Content), computer.MinOutputBudget, res.Content)
	}
	if !strings.Contains(res.Content, "file-with-a-long-name-0000.txt") || !strings.Contains(res.Content, "file-with-a-long-name-0499.txt") {
		t.Error("the head or the tail of the listing is missing")
	}
}

func numbered(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

func TestReadFile(t *testing.T) {
	c := newCategory(t, computer.Config{OutputBudget: computer.MinOutputBudget})
	h := home(t, c, agent)
	writeFile(t, filepath.Join(h, "small.txt"), numbered(10))
	writeFile(t, filepath.Join(h, "nonl.txt"), "one\ntwo")
	writeFile(t, filepath.Join(h, "big.txt"), numbered(5000))
	writeFile(t, filepath.Join(h, "long.txt"), strings.Repeat("é", 3000)+"\nend\n")
	writeFile(t, filepath.Join(h, "empty.txt"), "")
	writeFile(t, filepath.Join(h, "bin.dat"), "PK\x03\x04\x00\x00binary")
	tests := []struct {
		name         string
		args         map[string]any
		want, absent []string
		errHas       string
	}{
		{name: "whole small file", args: map[string]any{"path": "small.txt"},
			want: []string{"small.txt: lines 1–10 of 10", "line 1\n", "line 10\n"}},
		{name: "line range", args: map[string]any{"path": "small.txt", "start_line": 3, "end_line": 4},
			want: []string{"lines 3–4", "line 3\nline 4\n", "goes on after line 4"}, absent: []string{"line 2\n", "line 5\n"}},
		{name: "to the end", args: map[string]any{"path": "small.txt", "start_line": 9},
			want: []string{"lines 9–10 of 10", "line 9\nline 10\n"}},
		{name: "no final newline", args: map[string]any{"path": "nonl.txt"}, want: []string{"lines 1–2 of 2", "one\ntwo"}},
		{name: "past the end", args: map[string]any{"path": "small.txt", "start_line": 11}, errHas: "has 10 lines"},
		{name: "big file capped", args: map[string]any{"path": "big.txt"},
			want: []string{"line 1\n", "more lines follow; read on with start_line="}, absent: []string{"line 5000\n"}},
		{name: "big file from the middle", args: map[string]any{"path": "big.txt", "start_line": 4990},
			want: []string{"lines 4990–5000 of 5000", "line 4990\n", "line 5000\n"}},
		{name: "one line over the budget", args: map[string]any{"path": "long.txt"},
			want: []string{"cut at the", "inside line 1", "offset="}, absent: []string{"end"}},
		{name: "byte range", args: map[string]any{"path": "small.txt", "offset": 7, "length": 6},
			want: []string{"bytes 7–13 of", "line 2"}},
		{name: "byte range capped", args: map[string]any{"path": "big.txt", "offset": 100},
			want: []string{"bytes 100–", "read on with offset="}},
		{name: "byte offset past the end", args: map[string]any{"path": "small.txt", "offset": 1000}, errHas: "past the end"},
		{name: "lines and bytes", args: map[string]any{"path": "small.txt", "start_line": 1, "offset": 3}, errHas: "not both"},
		{name: "end before start", args: map[string]any{"path": "small.txt", "start_line": 5, "end_line": 2}, errHas: "before start_line"},
		{name: "empty", args: map[string]any{"path": "empty.txt"}, want: []string{"empty file"}},
		{name: "binary", args: map[string]any{"path": "bin.dat"}, errHas: "looks binary"},
		{name: "directory", args: map[string]any{"path": "."}, errHas: "is a directory"},
		{name: "missing", args: map[string]any{"path": "nope.txt"}, errHas: "does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := run(t, c, computer.ReadFileName, tt.args)
			if tt.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("err = %v, want one saying %q", err, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Content) > computer.MinOutputBudget {
				t.Errorf("result is %d bytes, over the budget", len(res.Content))
			}
			for _, w := range tt.want {
				if !strings.Contains(res.Content, w) {
					t.Errorf("lacks %q:\n%s", w, res.Content)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(res.Content, a) {
					t.Errorf("has %q:\n%s", a, res.Content)
				}
			}
			if strings.Contains(res.Content, "\uFFFD") {
				t.Errorf("a cut split a character:\n%s", res.Content)
			}
		})
	}
}

func TestWriteFile(t *testing.T) {
	c := newCategory(t, computer.Config{MaxFileBytes: 100})
	h := home(t, c, agent)
	res, err := run(t, c, computer.WriteFileName, map[string]any{"path": "dir/f.txt", "content": "a\nb\n"})
	if err != nil || !strings.Contains(res.Content, "created") || readFile(t, filepath.Join(h, "dir/f.txt")) != "a\nb\n" {
		t.Fatalf("create: %q, %v", res.Content, err)
	}
	if res, err = run(t, c, computer.WriteFileName, map[string]any{"path": "dir/f.txt", "content": "c\n", "append": true}); err != nil || readFile(t, filepath.Join(h, "dir/f.txt")) != "a\nb\nc\n" {
		t.Fatalf("append: %q, %v", res.Content, err)
	}
	if res, err = run(t, c, computer.WriteFileName, map[string]any{"path": "dir/f.txt", "content": ""}); err != nil || !strings.Contains(res.Content, "replaced") || readFile(t, filepath.Join(h, "dir/f.txt")) != "" {
		t.Fatalf("replace: %q, %v", res.Content, err)
	}
	if _, err = run(t, c, computer.WriteFileName, map[string]any{"path": "big", "content": strings.Repeat("x", 101)}); kindOf(err) != tool.InvalidArguments {
		t.Errorf("over the limit: %v", err)
	}
	if _, err = run(t, c, computer.WriteFileName, map[string]any{"path": "dir", "content": "x"}); err == nil {
		t.Error("writing over a directory succeeded")
	}
	if _, err = run(t, c, computer.WriteFileName, map[string]any{"path": "~", "content": "x"}); kindOf(err) != tool.InvalidArguments {
		t.Errorf("writing the home itself: %v", err)
	}
}

func TestEditFile(t *testing.T) {
	c := newCategory(t, computer.Config{})
	h := home(t, c, agent)
	const original = "alpha\nbeta\ngamma\nbeta\n"
	tests := []struct {
		name    string
		file    string
		args    map[string]any
		want    string // the file afterwards
		content string // in the answer
		errHas  []string
	}{
		{name: "unique", args: map[string]any{"old_text": "gamma", "new_text": "GAMMA"},
			want: "alpha\nbeta\nGAMMA\nbeta\n", content: "Replaced 1 occurrence in f.txt (at lines 3)"},
		{name: "multi-line", args: map[string]any{"old_text": "alpha\nbeta\n", "new_text": ""},
			want: "gamma\nbeta\n"},
		{name: "ambiguous", args: map[string]any{"old_text": "beta", "new_text": "B"},
			errHas: []string{"occurs 2 times", "lines 2, 4", "replace_all"}},
		{name: "replace all", args: map[string]any{"old_text": "beta", "new_text": "B", "replace_all": true},
			want: "alpha\nB\ngamma\nB\n", content: "Replaced 2 occurrences"},
		{name: "missing", args: map[string]any{"old_text": "delta", "new_text": "D"},
			errHas: []string{"not found", "nothing was changed", "read_file"}},
		{name: "missing: indentation", args: map[string]any{"old_text": "alpha\n  beta", "new_text": "x"},
			errHas: []string{"different spacing"}},
		{name: "missing: CRLF", file: "alpha\r\nbeta\r\n", args: map[string]any{"old_text": "alpha\nbeta", "new_text": "x"},
			errHas: []string{"CRLF"}},
		{name: "same text", args: map[string]any{"old_text": "beta", "new_text": "beta"}, errHas: []string{"the same"}},
		{name: "empty old text", args: map[string]any{"old_text": "", "new_text": "x"}, errHas: []string{"/old_text"}},
		{name: "no file", args: map[string]any{"path": "nope.txt", "old_text": "a", "new_text": "b"}, errHas: []string{"does not exist"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := original
			if tt.file != "" {
				file = tt.file
			}
			writeFile(t, filepath.Join(h, "f.txt"), file)
			if _, ok := tt.args["path"]; !ok {
				tt.args["path"] = "f.txt"
			}
			res, err := run(t, c, computer.EditFileName, tt.args)
			got := readFile(t, filepath.Join(h, "f.txt"))
			if tt.errHas != nil {
				if err == nil {
					t.Fatalf("edit succeeded: %q", res.Content)
				}
				for _, w := range tt.errHas {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error lacks %q: %v", w, err)
					}
				}
				if got != file {
					t.Errorf("a failed edit changed the file to %q", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("file = %q, want %q", got, tt.want)
			}
			if !strings.Contains(res.Content, tt.content) {
				t.Errorf("answer %q lacks %q", res.Content, tt.content)
			}
		})
	}
}

// The tools declare what the dispatcher schedules by: reads are
// read-only and parallel, writes sequential, run_command destructive.
func TestSpecs(t *testing.T) {
	c := newCategory(t, computer.Config{})
	type flags struct {
		readOnly, destructive bool
		mode                  tool.Mode
	}
	want := map[string]flags{
		computer.ListFilesName:  {true, false, tool.Parallel},
		computer.ReadFileName:   {true, false, tool.Parallel},
		computer.WriteFileName:  {false, false, tool.Sequential},
		computer.EditFileName:   {false, false, tool.Sequential},
		computer.RunCommandName: {false, true, tool.Sequential},
	}
	var names []string
	for _, tl := range c.Tools() {
		sp := tl.Spec()
		names = append(names, sp.Name)
		if got := (flags{sp.ReadOnly, sp.Destructive, sp.ExecutionMode}); got != want[sp.Name] {
			t.Errorf("%s: %+v, want %+v", sp.Name, got, want[sp.Name])
		}
	}
	if !slices.Equal(names, []string{"list_files", "read_file", "write_file", "edit_file", "run_command"}) {
		t.Errorf("tools = %v", names)
	}
}

func TestActivityLabels(t *testing.T) {
	c := newCategory(t, computer.Config{})
	long := "echo " + strings.Repeat("x", 200)
	tests := []struct {
		tool, args, want string
	}{
		{computer.RunCommandName, `{"command":"ls -la"}`, "Running `ls -la`"},
		{computer.RunCommandName, `{"command":"cd src\nmake test"}`, "Running `cd src …`"},
		{computer.RunCommandName, fmt.Sprintf(`{"command":%q}`, long), "Running `" + long[:59] + "…`"},
		{computer.ReadFileName, `{"path":"notes.txt"}`, "Reading notes.txt"},
		{computer.ListFilesName, `{}`, "Listing ~"},
		{computer.WriteFileName, `{"path":"a.txt","content":""}`, "Writing a.txt"},
		{computer.EditFileName, `{"path":"a.txt","old_text":"a","new_text":"b"}`, "Editing a.txt"},
	}
	for _, tt := range tests {
		inv, err := tools.Prepare(findTool(t, c, tt.tool), tt.args, 0)
		if err != nil {
			t.Fatal(err)
		}
		if inv.Activity != tt.want {
			t.Errorf("%s %s: activity %q, want %q", tt.tool, tt.args, inv.Activity, tt.want)
		}
	}
}

func notExecutable(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "sh")
	writeFile(t, p, "#!/bin/sh\n")
	return p
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, cfg := range []computer.Config{
		{},
		{Root: t.TempDir(), OutputBudget: 100},
		{Root: t.TempDir(), Env: []string{"NOEQUALS"}},
		{Root: t.TempDir(), Env: []string{"HOME=/root"}},
		{Root: t.TempDir(), Shell: "sh"},
		{Root: t.TempDir(), Shell: "/nonexistent/sh"},
		{Root: t.TempDir(), Shell: notExecutable(t)},
		{Root: t.TempDir(), CommandTimeout: time.Hour, MaxCommandTimeout: time.Minute},
	} {
		if _, err := computer.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted it", cfg)
		}
	}
}
