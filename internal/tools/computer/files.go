package computer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/agentbull/toolruntime/internal/tools"
)

// maxListEntries bounds the entries list_files looks at, whatever the
// budget; a deep tree is cut rather than walked to the end.
const maxListEntries = 2000

// ListParams are list_files' parameters.
type ListParams struct {
	Path  string `json:"path,omitempty" jsonschema:"description=The directory to list\\, relative to your home (default: the home itself)."`
	Depth int    `json:"depth,omitempty" jsonschema:"description=How many levels to descend: 1 lists the directory's own entries (the default).,minimum=1,maximum=10"`
}

// ReadParams are read_file's parameters.
type ReadParams struct {
	Path      string `json:"path" jsonschema:"description=The file to read\\, relative to your home.,minLength=1"`
	StartLine int    `json:"start_line,omitempty" jsonschema:"description=First line to read (1-based; default 1).,minimum=1"`
	EndLine   int    `json:"end_line,omitempty" jsonschema:"description=Last line to read (inclusive; default: as far as the output budget allows).,minimum=1"`
	Offset    int64  `json:"offset,omitempty" jsonschema:"description=Read bytes instead of lines\\, starting at this byte offset.,minimum=0"`
	Length    int64  `json:"length,omitempty" jsonschema:"description=With offset: how many bytes to read (default: as many as the output budget allows).,minimum=1"`
}

// WriteParams are write_file's parameters.
type WriteParams struct {
	Path    string `json:"path" jsonschema:"description=The file to write\\, relative to your home. Missing parent directories are created.,minLength=1"`
	Content string `json:"content" jsonschema:"description=The file's complete new content."`
	Append  bool   `json:"append,omitempty" jsonschema:"description=Add content at the end of the file instead of replacing it."`
}

// EditParams are edit_file's parameters.
type EditParams struct {
	Path       string `json:"path" jsonschema:"description=The file to edit\\, relative to your home.,minLength=1"`
	OldText    string `json:"old_text" jsonschema:"description=The exact text to replace\\, whitespace and line breaks included. It must occur exactly once unless replace_all is set.,minLength=1"`
	NewText    string `json:"new_text" jsonschema:"description=The text to put in its place."`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"description=Replace every occurrence instead of requiring exactly one."`
}

func (c *Category) listFiles() *tools.Tool {
	return tools.Must(tools.Def[ListParams]{
		Spec: tools.Spec{Name: ListFilesName, ReadOnly: true,
			Description: "List the files and directories in your home directory or one of its subdirectories: directories end with /, symbolic links show their target, files their size."},
		Activity: func(p ListParams) string { return "Listing " + displayPath(p.Path) },
		Execute:  c.list,
	})
}

func (c *Category) readFile() *tools.Tool {
	return tools.Must(tools.Def[ReadParams]{
		Spec: tools.Spec{Name: ReadFileName, ReadOnly: true,
			Description: fmt.Sprintf("Read a text file in your home directory: by lines (start_line, end_line) or by bytes (offset, length). At most %s comes back per call; the answer says how to read on.", byteCount(int64(c.cfg.OutputBudget)))},
		Activity: func(p ReadParams) string { return "Reading " + displayPath(p.Path) },
		Execute:  c.read,
	})
}

func (c *Category) writeFile() *tools.Tool {
	return tools.Must(tools.Def[WriteParams]{
		Spec: tools.Spec{Name: WriteFileName,
			Description: "Write a file in your home directory, replacing its content (or appending to it). Creates the file and its missing parent directories."},
		Activity: func(p WriteParams) string { return "Writing " + displayPath(p.Path) },
		Execute:  c.write,
	})
}

func (c *Category) editFile() *tools.Tool {
	return tools.Must(tools.Def[EditParams]{
		Spec: tools.Spec{Name: EditFileName,
			Description: "Edit a file in your home directory by exact replacement: old_text must occur exactly once (or set replace_all). Read the file first and copy the text exactly."},
		Activity: func(p EditParams) string { return "Editing " + displayPath(p.Path) },
		Execute:  c.edit,
	})
}

func displayPath(p string) string {
	if strings.TrimSpace(p) == "" {
		return "~"
	}
	return short(p, 80)
}

// short cuts s to at most n runes, marking the cut.
func short(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func (c *Category) list(ctx context.Context, p ListParams) (tools.Result, error) {
	h, rel, err := c.open(ctx, p.Path)
	if err != nil {
		return tools.Result{}, err
	}
	defer h.close()
	depth := max(p.Depth, 1)
	fi, err := h.root.Stat(rel)
	if err != nil {
		return tools.Result{}, fileError("list", p.Path, err)
	}
	if !fi.IsDir() {
		return tools.Result{}, tools.Errorf(tools.ToolError, "Cannot list %s: it is a file (%s). Read it with read_file.", displayPath(p.Path), byteCount(fi.Size()))
	}
	start := filepath.ToSlash(rel)
	var b strings.Builder
	entries, cut := 0, false
	walkErr := fs.WalkDir(h.root.FS(), start, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			if name == start {
				return err
			}
			fmt.Fprintf(&b, "%s  (unreadable: %v)\n", relTo(start, name), errors.Unwrap(err))
			return nil
		}
		if name == start {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if entries >= maxListEntries {
			cut = true
			return fs.SkipAll
		}
		entries++
		shown := relTo(start, name)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := h.root.Readlink(name)
			if err != nil {
				target = "?"
			}
			fmt.Fprintf(&b, "%s -> %s\n", shown, target)
		case d.IsDir():
			fmt.Fprintf(&b, "%s/\n", shown)
			if strings.Count(shown, "/")+1 >= depth {
				return fs.SkipDir
			}
		default:
			info, err := d.Info()
			if err != nil {
				fmt.Fprintf(&b, "%s\n", shown)
				break
			}
			if d.Type().IsRegular() {
				fmt.Fprintf(&b, "%s  (%s)\n", shown, byteCount(info.Size()))
			} else {
				fmt.Fprintf(&b, "%s  (%s)\n", shown, info.Mode().Type())
			}
		}
		return nil
	})
	if walkErr != nil {
		return tools.Result{}, fileError("list", p.Path, walkErr)
	}
	text := b.String()
	if entries == 0 {
		text = "(empty directory)\n"
	}
	if cut {
		text += fmt.Sprintf("[stopped after %d entries; list a subdirectory or use a smaller depth]\n", maxListEntries)
	}
	text, clipped := clip(text, c.cfg.OutputBudget, "")
	return tools.Result{
		Content: text,
		Details: map[string]any{"path": rel, "entries": entries, "depth": depth, "truncated": cut || clipped},
	}, nil
}

// relTo is name (a slash path in the home) as seen from start.
func relTo(start, name string) string {
	if start == "." {
		return name
	}
	return strings.TrimPrefix(name, start+"/")
}

// binarySniff is how much of a file is looked at to tell binary from text.
const binarySniff = 8000

func (c *Category) read(ctx context.Context, p ReadParams) (tools.Result, error) {
	byLines := p.StartLine > 0 || p.EndLine > 0
	byBytes := p.Offset > 0 || p.Length > 0
	switch {
	case byLines && byBytes:
		return tools.Result{}, tools.Errorf(tools.InvalidArguments, "Give either a line range (start_line, end_line) or a byte range (offset, length), not both.")
	case p.EndLine > 0 && p.StartLine > p.EndLine:
		return tools.Result{}, tools.Errorf(tools.InvalidArguments, "end_line %d is before start_line %d.", p.EndLine, p.StartLine)
	}
	h, rel, err := c.open(ctx, p.Path)
	if err != nil {
		return tools.Result{}, err
	}
	defer h.close()
	f, err := h.root.Open(rel)
	if err != nil {
		return tools.Result{}, fileError("read", p.Path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return tools.Result{}, fileError("read", p.Path, err)
	}
	if fi.IsDir() {
		return tools.Result{}, tools.Errorf(tools.ToolError, "Cannot read %s: it is a directory. List it with list_files.", p.Path)
	}
	if !fi.Mode().IsRegular() {
		return tools.Result{}, tools.Errorf(tools.ToolError, "Cannot read %s: it is not a regular file (%s).", p.Path, fi.Mode().Type())
	}
	sniff := make([]byte, binarySniff)
	n, err := io.ReadFull(f, sniff)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return tools.Result{}, fileError("read", p.Path, err)
	}
	if bytes.IndexByte(sniff[:n], 0) >= 0 {
		return tools.Result{}, tools.Errorf(tools.ToolError,
			"%s looks binary (%s; it contains NUL bytes), so it is not shown as text. Inspect it with run_command, e.g. `file %s` or `xxd -l 512 %s`.",
			p.Path, byteCount(fi.Size()), shellQuote(rel), shellQuote(rel))
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return tools.Result{}, fileError("read", p.Path, err)
	}
	limit := c.cfg.OutputBudget - noteReserve
	if byBytes {
		return c.readBytes(f, rel, fi, p, limit)
	}
	return c.readLines(ctx, f, rel, fi, p, limit)
}

func (c *Category) readBytes(f *os.File, rel string, fi os.FileInfo, p ReadParams, limit int) (tools.Result, error) {
	size := fi.Size()
	if p.Offset >= size && size > 0 || p.Offset > 0 && size == 0 {
		return tools.Result{}, tools.Errorf(tools.ToolError, "Offset %d is at or past the end of %s (%s).", p.Offset, p.Path, byteCount(size))
	}
	want := int64(limit)
	if p.Length > 0 && p.Length < want {
		want = p.Length
	}
	buf := make([]byte, want)
	n, err := f.ReadAt(buf, p.Offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return tools.Result{}, fileError("read", p.Path, err)
	}
	buf = buf[:n]
	end := p.Offset + int64(n)
	var b strings.Builder
	fmt.Fprintf(&b, "%s: bytes %d–%d of %d\n", rel, p.Offset, end, size)
	b.WriteString(strings.ToValidUTF8(string(buf), "\uFFFD"))
	truncated := p.Length > int64(n) && end < size || p.Length == 0 && end < size
	if truncated {
		fmt.Fprintf(&b, "\n[%s more; read on with offset=%d]\n", byteCount(size-end), end)
	}
	return tools.Result{
		Content: b.String(),
		Details: map[string]any{"path": rel, "size": size, "offset": p.Offset, "bytes": n, "truncated": truncated},
	}, nil
}

func (c *Category) readLines(ctx context.Context, f *os.File, rel string, fi os.FileInfo, p ReadParams, limit int) (tools.Result, error) {
	first := max(p.StartLine, 1)
	br := bufio.NewReaderSize(f, 64<<10)
	var out strings.Builder
	line, pos := 1, int64(0) // the line being read and its byte position
	last := 0                // the last line shown in full
	eof, cutAt, endsNL := false, int64(-1), false
	partial := false // part of the current line is in out
	for {
		if err := ctx.Err(); err != nil {
			return tools.Result{}, err
		}
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			if line >= first {
				if out.Len()+len(chunk) > limit {
					if last >= first && !partial {
						// Whole lines only, unless a single line is
						// over the budget.
						break
					}
					part := headOf(string(chunk), limit-out.Len())
					out.WriteString(part)
					cutAt = pos + int64(len(part))
					break
				}
				out.Write(chunk)
			}
			pos += int64(len(chunk))
			endsNL = chunk[len(chunk)-1] == '\n'
			partial = line >= first && !endsNL
			if endsNL {
				if line >= first {
					last = line
				}
				line++
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) {
			eof = true
			if len(chunk) > 0 && chunk[len(chunk)-1] != '\n' && line >= first {
				last = line // a last line without a newline
			}
			break
		}
		if err != nil {
			return tools.Result{}, fileError("read", p.Path, err)
		}
		if p.EndLine > 0 && line > p.EndLine {
			break
		}
	}
	total := 0 // known only when the end was reached
	switch {
	case eof && pos == 0:
	case eof && endsNL:
		total = line - 1
	case eof:
		total = line
	}
	var b strings.Builder
	switch {
	case fi.Size() == 0:
		fmt.Fprintf(&b, "%s: empty file\n", rel)
	case first > last && cutAt < 0:
		if eof {
			return tools.Result{}, tools.Errorf(tools.ToolError, "%s has %d lines; start_line %d is past the end.", p.Path, total, first)
		}
	case eof && cutAt < 0:
		fmt.Fprintf(&b, "%s: lines %d–%d of %d (%s)\n", rel, first, last, total, byteCount(fi.Size()))
	default:
		fmt.Fprintf(&b, "%s: lines %d–%d (%s in all)\n", rel, first, max(last, first), byteCount(fi.Size()))
	}
	b.WriteString(strings.ToValidUTF8(out.String(), "\uFFFD"))
	truncated := false
	switch {
	case cutAt >= 0:
		truncated = true
		fmt.Fprintf(&b, "\n[cut at the %s output budget inside line %d; read on with start_line=%d, or with offset=%d for bytes]\n",
			byteCount(int64(c.cfg.OutputBudget)), last+1, last+1, cutAt)
	case !eof && (p.EndLine == 0 || last < p.EndLine):
		truncated = true
		fmt.Fprintf(&b, "\n[more lines follow; read on with start_line=%d]\n", last+1)
	case !eof:
		fmt.Fprintf(&b, "\n[the file goes on after line %d]\n", last)
	}
	return tools.Result{
		Content: b.String(),
		Details: map[string]any{"path": rel, "size": fi.Size(), "start_line": first, "end_line": last, "lines": total, "truncated": truncated},
	}, nil
}

func (c *Category) write(ctx context.Context, p WriteParams) (tools.Result, error) {
	if int64(len(p.Content)) > c.cfg.MaxFileBytes {
		return tools.Result{}, tools.Errorf(tools.InvalidArguments, "The content is %s, over the %s limit of write_file.", byteCount(int64(len(p.Content))), byteCount(c.cfg.MaxFileBytes))
	}
	h, rel, err := c.open(ctx, p.Path)
	if err != nil {
		return tools.Result{}, err
	}
	defer h.close()
	if rel == "." {
		return tools.Result{}, tools.Errorf(tools.InvalidArguments, "The path names your home directory itself; name a file in it.")
	}
	if dir := filepath.Dir(rel); dir != "." {
		if err := h.root.MkdirAll(dir, 0o755); err != nil {
			return tools.Result{}, fileError("create the directory for", p.Path, err)
		}
	}
	_, statErr := h.root.Stat(rel)
	created := errors.Is(statErr, fs.ErrNotExist)
	flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	verb := "Wrote"
	if p.Append {
		flag, verb = os.O_WRONLY|os.O_CREATE|os.O_APPEND, "Appended"
	}
	f, err := h.root.OpenFile(rel, flag, 0o644)
	if err != nil {
		return tools.Result{}, fileError("write", p.Path, err)
	}
	_, err = f.WriteString(p.Content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return tools.Result{}, fileError("write", p.Path, err)
	}
	fi, err := h.root.Stat(rel)
	size := int64(-1)
	if err == nil {
		size = fi.Size()
	}
	what := "replaced"
	switch {
	case created:
		what = "created"
	case p.Append:
		what = "appended to"
	}
	return tools.Result{
		Content: fmt.Sprintf("%s %s (%d lines) to %s (%s; now %s).", verb, byteCount(int64(len(p.Content))), lineCount(p.Content), rel, what, byteCount(size)),
		Details: map[string]any{"path": rel, "bytes": len(p.Content), "size": size, "created": created, "append": p.Append},
	}, nil
}

func lineCount(s string) int {
	if s == "" {
		return 0
	}
	n := strings.Count(s, "\n")
	if !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// maxListedOccurrences bounds the line numbers an ambiguity error names.
const maxListedOccurrences = 10

func (c *Category) edit(ctx context.Context, p EditParams) (tools.Result, error) {
	if p.OldText == p.NewText {
		return tools.Result{}, tools.Errorf(tools.InvalidArguments, "old_text and new_text are the same: there is nothing to change.")
	}
	h, rel, err := c.open(ctx, p.Path)
	if err != nil {
		return tools.Result{}, err
	}
	defer h.close()
	fi, err := h.root.Stat(rel)
	if err != nil {
		return tools.Result{}, fileError("edit", p.Path, err)
	}
	if !fi.Mode().IsRegular() {
		return tools.Result{}, tools.Errorf(tools.ToolError, "Cannot edit %s: it is not a regular file.", p.Path)
	}
	if fi.Size() > c.cfg.MaxFileBytes {
		return tools.Result{}, tools.Errorf(tools.ToolError, "Cannot edit %s: it is %s, over the %s limit of edit_file. Use run_command (sed, a script) instead.", p.Path, byteCount(fi.Size()), byteCount(c.cfg.MaxFileBytes))
	}
	data, err := h.root.ReadFile(rel)
	if err != nil {
		return tools.Result{}, fileError("read", p.Path, err)
	}
	text := string(data)
	at := occurrences(text, p.OldText)
	switch {
	case len(at) == 0:
		return tools.Result{}, tools.Errorf(tools.ToolError, "old_text was not found in %s; nothing was changed. %s", p.Path, missHint(text, p.OldText))
	case len(at) > 1 && !p.ReplaceAll:
		return tools.Result{}, tools.Errorf(tools.ToolError,
			"old_text occurs %d times in %s (at lines %s); nothing was changed. Include more of the surrounding text so that it occurs once, or set replace_all to replace every occurrence.",
			len(at), p.Path, lineList(text, at))
	}
	var updated string
	if p.ReplaceAll {
		updated = strings.ReplaceAll(text, p.OldText, p.NewText)
	} else {
		updated = text[:at[0]] + p.NewText + text[at[0]+len(p.OldText):]
	}
	if int64(len(updated)) > c.cfg.MaxFileBytes {
		return tools.Result{}, tools.Errorf(tools.ToolError, "The edit would make %s %s, over the %s limit; nothing was changed.", p.Path, byteCount(int64(len(updated))), byteCount(c.cfg.MaxFileBytes))
	}
	if err := h.root.WriteFile(rel, []byte(updated), fi.Mode().Perm()); err != nil {
		return tools.Result{}, fileError("write", p.Path, err)
	}
	lines := make([]int, 0, min(len(at), maxListedOccurrences))
	for _, i := range at[:min(len(at), maxListedOccurrences)] {
		lines = append(lines, strings.Count(text[:i], "\n")+1)
	}
	noun := "occurrence"
	if len(at) > 1 {
		noun = "occurrences"
	}
	return tools.Result{
		Content: fmt.Sprintf("Replaced %d %s in %s (at lines %s); the file is now %s.", len(at), noun, rel, lineList(text, at), byteCount(int64(len(updated)))),
		Details: map[string]any{"path": rel, "replacements": len(at), "lines": lines, "bytes_before": len(text), "bytes_after": len(updated)},
	}, nil
}

// occurrences are the byte offsets of the non-overlapping occurrences of
// old in text, as strings.ReplaceAll would replace them.
func occurrences(text, old string) []int {
	var at []int
	for i := 0; ; {
		j := strings.Index(text[i:], old)
		if j < 0 {
			return at
		}
		at = append(at, i+j)
		i += j + len(old)
	}
}

func lineList(text string, at []int) string {
	var parts []string
	for k, i := range at {
		if k == maxListedOccurrences {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, fmt.Sprint(strings.Count(text[:i], "\n")+1))
	}
	return strings.Join(parts, ", ")
}

// missHint guesses why old was not found, for the model's next try.
func missHint(text, old string) string {
	switch {
	case strings.Contains(text, "\r\n") && strings.Contains(strings.ReplaceAll(text, "\r\n", "\n"), old):
		return "The file has CRLF line endings (\\r\\n); old_text must have them too."
	case strings.TrimSpace(old) != old && strings.Contains(text, strings.TrimSpace(old)):
		return "It occurs without the leading or trailing whitespace you gave; copy the text exactly."
	case strings.Contains(collapseSpace(text), collapseSpace(old)):
		return "It occurs with different spacing or indentation; read the file and copy the text exactly."
	}
	return "Read the file (read_file) and copy the text to replace exactly, whitespace and line breaks included."
}

func collapseSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
